#include "completion.h"

#include <httplib.h>

#include "core/format.h"
#include "server.h"

namespace cactus::server {

namespace {

// llama-server's error type for a status (server-common.cpp format_error_response).
const char* error_type_for(int status) {
    if (status == 503) return "unavailable_error";
    if (status == 501) return "not_supported_error";
    if (status == 404) return "not_found_error";
    return status >= 400 && status < 500 ? "invalid_request_error" : "server_error";
}

std::string openai_finish(const std::string& reason) {
    if (reason == "stop" || reason == "length") return reason;
    return "length";  // cancelled (shutdown) or timeout: the answer was cut short
}

// Runs inside the response's content provider, on the HTTP worker thread.
class Driver {
public:
    Driver(std::shared_ptr<Job> job, std::vector<GenEvent> first, std::shared_ptr<Formatter> f, bool stream,
           HandoffPlan plan)
        : job_(std::move(job)),
          pending_(std::move(first)),
          f_(std::move(f)),
          stream_(stream),
          plan_(std::move(plan)),
          deciding_(plan_.check_confidence && plan_.call) {}

    // Returns false when the client went away (the job is cancelled then).
    bool run(httplib::DataSink& sink) {
        // The first event (the prompt is in by then) tells the stream's opening what was cached.
        if (!pending_.empty()) f_->observe(pending_.front());
        if (stream_ && !write(sink, f_->stream_start())) return abort();
        while (!finished_) {
            for (GenEvent& e : pending_) {
                if (!handle(e, sink)) return abort();
                if (finished_) break;
            }
            pending_.clear();
            if (finished_) break;
            while (!job_->take(&pending_, std::chrono::milliseconds(100))) {
                if (!alive(sink)) return abort();
            }
            if (!alive(sink)) return abort();
        }
        if (c_.failed) {
            // A stream's headers (200) are out: its error goes in the body. A whole answer's error
            // is the response's status (respond()).
            if (stream_ && !write(sink, f_->stream_error(c_.error_status, c_.error))) return abort();
        } else if (!write(sink, stream_ ? f_->stream_end(c_) : f_->whole(c_))) {
            return abort();
        }
        sink.done();
        return true;
    }

    const Completion& completion() const { return c_; }

    void cancel() { job_->cancel(); }

private:
    // Whether the client is still there. A write to a closed stream fails (the first one after the
    // close may still succeed); a whole answer's connection is looked at directly, since nothing is
    // written before the answer is known. A client that left frees its slot within ~0.1 s.
    bool alive(httplib::DataSink& sink) {
        if (!sink.is_writable()) return false;
        return stream_ || current_client_connected();
    }

    static bool write(httplib::DataSink& sink, const std::string& s) {
        return s.empty() || sink.write(s.data(), s.size());
    }

    bool abort() {
        job_->cancel();
        return false;
    }

    bool handle(GenEvent& e, httplib::DataSink& sink) {
        f_->observe(e);
        switch (e.kind) {
            case GenEvent::Kind::Progress:
                return !stream_ || write(sink, f_->stream_progress(e));
            case GenEvent::Kind::Token:
                c_.text += e.text;
                c_.tokens.push_back(e.token);
                if (deciding_) {
                    held_text_ += e.text;
                    return c_.tokens.size() >= plan_.tokens ? decide(sink) : true;
                }
                return !stream_ || write(sink, f_->stream_piece(e.text, {e.token}));
            case GenEvent::Kind::Done:
                finished_ = true;
                c_.text += e.text;
                c_.finish_reason = openai_finish(e.finish_reason);
                c_.stop_word = e.stats.stop_word;
                c_.stats = e.stats;
                if (deciding_) {
                    held_text_ += e.text;
                    return decide(sink);
                }
                return !stream_ || e.text.empty() || write(sink, f_->stream_piece(e.text, {}));
            case GenEvent::Kind::Error:
                finished_ = true;
                c_.failed = true;
                c_.error_status = e.status;
                c_.error = e.error;
                return true;
        }
        return true;
    }

    // The first tokens are in (or the answer ended sooner): hand off, or let the held text go.
    bool decide(httplib::DataSink& sink) {
        deciding_ = false;
        c_.confidence = mean_probability(c_.tokens);
        if (c_.confidence < plan_.threshold) {
            Completion cloud = c_;
            cloud.cloud_reason = low_confidence_reason(c_.confidence, plan_.threshold, c_.tokens.size());
            std::string error;
            if (plan_.call(&cloud, &error)) {
                job_->cancel();
                c_ = std::move(cloud);
                finished_ = true;
                return !stream_ || write(sink, f_->stream_piece(c_.text, {}));
            }
            c_.handoff_error = error;
        }
        std::string held = std::move(held_text_);
        held_text_.clear();
        return !stream_ || write(sink, f_->stream_piece(held, c_.tokens));
    }

    std::shared_ptr<Job> job_;
    std::vector<GenEvent> pending_;
    std::shared_ptr<Formatter> f_;
    bool stream_;
    HandoffPlan plan_;
    bool deciding_;
    bool finished_ = false;
    std::string held_text_;
    Completion c_;
};

}  // namespace

double mean_probability(const std::vector<TokenInfo>& tokens) {
    if (tokens.empty()) return 0.0;
    double sum = 0.0;
    for (const TokenInfo& t : tokens) sum += t.probability;
    return sum / static_cast<double>(tokens.size());
}

namespace {

std::shared_ptr<Job> submit_job(Server& server, GenParams params) {
    if (server.draining()) throw HttpError{503, "the server is shutting down", "", "unavailable_error", "", 1};
    std::shared_ptr<Job> job = server.scheduler().submit(std::move(params));
    if (!job) {
        throw HttpError{429,
                        cactus::format("all %zu slots are busy and %zu requests are queued; retry later",
                                       server.scheduler().n_slots(), server.scheduler().options().max_queue),
                        "",
                        "rate_limit_error",
                        "queue_full",
                        1};
    }
    return job;
}

void wait_first(Job& job, std::vector<GenEvent>* first) {
    const Clock::time_point deadline = job.params().deadline;
    // The scheduler enforces the deadline; the grace covers a step in progress.
    const Clock::time_point give_up =
        deadline == Clock::time_point::max() ? deadline : deadline + std::chrono::seconds(5);
    while (!job.take(first, std::chrono::milliseconds(100))) {
        if (Clock::now() >= give_up) {
            job.cancel();
            throw HttpError{504, "the request timed out", "", "server_error", "timeout"};
        }
    }
    const GenEvent& e = first->front();
    if (e.kind == GenEvent::Kind::Error) throw HttpError{e.status, e.error, "", error_type_for(e.status)};
}

// One choice's answer gathered from its job's events.
struct Choice {
    std::shared_ptr<Job> job;
    std::vector<GenEvent> pending;
    std::shared_ptr<Formatter> f;
    Completion c;
    bool done = false;
};

// Folds the events into the choice; streamed, writes its pieces. False when a write failed.
bool absorb(Choice& ch, bool stream, httplib::DataSink& sink) {
    auto write = [&sink](const std::string& s) { return s.empty() || sink.write(s.data(), s.size()); };
    for (GenEvent& e : ch.pending) {
        if (ch.done) break;
        if (e.kind == GenEvent::Kind::Token) {
            ch.c.text += e.text;
            ch.c.tokens.push_back(e.token);
            if (stream && !write(ch.f->stream_piece(e.text, {e.token}))) return false;
        } else if (e.kind == GenEvent::Kind::Done) {
            ch.done = true;
            ch.c.text += e.text;
            ch.c.finish_reason = openai_finish(e.finish_reason);
            ch.c.stats = e.stats;
            if (stream && !e.text.empty() && !write(ch.f->stream_piece(e.text, {}))) return false;
            if (stream && !write(ch.f->stream_end(ch.c))) return false;
        } else {
            ch.done = true;
            ch.c.failed = true;
            ch.c.error_status = e.status;
            ch.c.error = e.error;
        }
    }
    ch.pending.clear();
    return true;
}

// The usage of all choices: the prompt once, the completions summed.
Completion total_of(const std::vector<Choice>& choices) {
    Completion total = choices.front().c;
    total.stats.completion_tokens = 0;
    for (const Choice& ch : choices) total.stats.completion_tokens += ch.c.stats.completion_tokens;
    return total;
}

// Whole answers of several choices → one response: the first's, with every choice and the usage
// summed (the formatters' JSON, so each protocol's shape is kept).
std::string merged_whole(std::vector<Choice>& choices) {
    nlohmann::ordered_json r = nlohmann::ordered_json::parse(choices.front().f->whole(choices.front().c));
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    for (Choice& ch : choices) {
        nlohmann::ordered_json one = nlohmann::ordered_json::parse(ch.f->whole(ch.c));
        for (auto& c : one["choices"]) all.push_back(c);
    }
    r["choices"] = all;
    if (r.contains("usage") && r["usage"].is_object()) {
        const Completion total = total_of(choices);
        r["usage"]["completion_tokens"] = total.stats.completion_tokens;
        r["usage"]["total_tokens"] = total.stats.prompt_tokens + total.stats.completion_tokens;
    }
    return r.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// Drives every choice to its end. False when the client left (the jobs are cancelled then).
bool drive_choices(std::vector<Choice>& choices, bool stream, httplib::DataSink& sink) {
    auto cancel_all = [&choices] {
        for (Choice& ch : choices) ch.job->cancel();
        return false;
    };
    auto write = [&sink](const std::string& s) { return s.empty() || sink.write(s.data(), s.size()); };
    if (stream)
        for (Choice& ch : choices)
            if (!write(ch.f->stream_start())) return cancel_all();
    const auto wait = std::chrono::milliseconds(std::max<size_t>(5, 50 / choices.size()));
    for (;;) {
        bool all_done = true;
        for (Choice& ch : choices) {
            if (!ch.done && ch.pending.empty()) ch.job->take(&ch.pending, wait);
            if (!absorb(ch, stream, sink)) return cancel_all();
            if (ch.c.failed) {
                cancel_all();
                if (stream) write(ch.f->stream_error(ch.c.error_status, ch.c.error));
                return true;
            }
            all_done = all_done && ch.done;
        }
        if (all_done) break;
        if (!sink.is_writable() || (!stream && !current_client_connected())) return cancel_all();
    }
    if (stream && !write(choices.back().f->stream_close(total_of(choices)))) return cancel_all();
    return true;
}

}  // namespace

std::shared_ptr<Job> start_job(Server& server, GenParams params, std::vector<GenEvent>* first) {
    std::shared_ptr<Job> job = submit_job(server, std::move(params));
    wait_first(*job, first);
    return job;
}

std::vector<std::shared_ptr<Job>> start_jobs(Server& server, std::vector<GenParams> params,
                                             std::vector<std::vector<GenEvent>>* firsts) {
    std::vector<std::shared_ptr<Job>> jobs;
    try {
        for (GenParams& p : params) jobs.push_back(submit_job(server, std::move(p)));
        firsts->assign(jobs.size(), {});
        for (size_t i = 0; i < jobs.size(); ++i) wait_first(*jobs[i], &(*firsts)[i]);
    } catch (...) {
        for (auto& j : jobs) j->cancel();
        throw;
    }
    return jobs;
}

void respond_choices(httplib::Response& res, std::vector<std::shared_ptr<Job>> jobs,
                     std::vector<std::vector<GenEvent>> firsts, std::vector<std::shared_ptr<Formatter>> fs,
                     bool stream) {
    auto choices = std::make_shared<std::vector<Choice>>(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
        (*choices)[i].job = jobs[i];
        (*choices)[i].pending = std::move(firsts[i]);
        (*choices)[i].f = fs[i];
        fs[i]->choice = i;
        fs[i]->closes_stream = false;
    }
    if (stream) {
        res.status = 200;
        res.set_header("Cache-Control", "no-cache");
        res.set_chunked_content_provider(
            fs.front()->content_type(true),
            [choices](size_t, httplib::DataSink& sink) {
                if (!drive_choices(*choices, true, sink)) return false;
                sink.done();
                return true;
            },
            [choices](bool) {
                for (Choice& ch : *choices) ch.job->cancel();
            });
        return;
    }
    httplib::DataSink sink;
    sink.write = [](const char*, size_t) { return true; };
    sink.done = [] {};
    sink.is_writable = [] { return true; };
    if (!drive_choices(*choices, false, sink)) {
        res.status = 499;  // the client left; the jobs are cancelled
        return;
    }
    for (const Choice& ch : *choices) {
        if (ch.c.failed) throw HttpError{ch.c.error_status, ch.c.error, "", error_type_for(ch.c.error_status)};
    }
    res.status = 200;
    res.set_content(merged_whole(*choices), fs.front()->content_type(false).c_str());
}

void respond(httplib::Response& res, Server& server, std::shared_ptr<Job> job, std::vector<GenEvent> first,
             std::shared_ptr<Formatter> f, bool stream, HandoffPlan plan) {
    (void)server;
    auto driver = std::make_shared<Driver>(std::move(job), std::move(first), f, stream, std::move(plan));
    if (stream) {
        res.status = 200;
        res.set_header("Cache-Control", "no-cache");
        res.set_chunked_content_provider(
            f->content_type(stream), [driver](size_t, httplib::DataSink& sink) { return driver->run(sink); },
            [driver](bool) { driver->cancel(); });
        return;
    }
    // A whole answer is driven on this thread and sent once known, so a failure after the first
    // token is still the response's status with an error body.
    std::string body;
    httplib::DataSink sink;
    sink.write = [&body](const char* data, size_t size) {
        body.append(data, size);
        return true;
    };
    sink.done = [] {};
    sink.is_writable = [] { return true; };
    if (!driver->run(sink)) {
        res.status = 499;  // the client left; its job is cancelled
        return;
    }
    const Completion& c = driver->completion();
    if (c.failed) throw HttpError{c.error_status, c.error, "", error_type_for(c.error_status)};
    res.status = 200;
    res.set_content(body, f->content_type(false).c_str());
}

void respond_done(httplib::Response& res, const Completion& c, std::shared_ptr<Formatter> f, bool stream) {
    std::string body;
    if (stream) {
        body = f->stream_start() + f->stream_piece(c.text, {}) + f->stream_end(c);
    } else {
        body = f->whole(c);
    }
    res.status = 200;
    res.set_content(body, f->content_type(stream).c_str());
}

}  // namespace cactus::server
