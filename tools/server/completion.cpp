#include "completion.h"

#include <httplib.h>

#include "core/format.h"
#include "server.h"

namespace cactus::server {

namespace {

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
        bool ok;
        if (c_.failed) {
            // Headers (200) are out: the error goes in the body.
            ok = write(sink, stream_ ? f_->stream_error(c_.error_status, c_.error)
                                     : nlohmann::ordered_json{{"error",
                                                               {{"message", c_.error},
                                                                {"type", "server_error"},
                                                                {"code", c_.error_status}}}}
                                           .dump());
        } else {
            ok = write(sink, stream_ ? f_->stream_end(c_) : f_->whole(c_));
        }
        if (!ok) return abort();
        sink.done();
        return true;
    }

    void cancel() { job_->cancel(); }

private:
    // Whether the client is still there. A write to a closed connection fails (the first one after
    // the close may still succeed), so a whole (non-streamed) answer is preceded by a space every
    // 250 ms: JSON allows leading whitespace, and a client that left frees its slot within ~0.5 s.
    bool alive(httplib::DataSink& sink) {
        if (!sink.is_writable()) return false;
        if (stream_) return true;
        const Clock::time_point now = Clock::now();
        if (now - last_heartbeat_ < std::chrono::milliseconds(250)) return true;
        last_heartbeat_ = now;
        return write(sink, " ");
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
    Clock::time_point last_heartbeat_ = Clock::now();
};

}  // namespace

double mean_probability(const std::vector<TokenInfo>& tokens) {
    if (tokens.empty()) return 0.0;
    double sum = 0.0;
    for (const TokenInfo& t : tokens) sum += t.probability;
    return sum / static_cast<double>(tokens.size());
}

std::shared_ptr<Job> start_job(Server& server, GenParams params, std::vector<GenEvent>* first) {
    if (server.draining()) throw HttpError{503, "the server is shutting down", "", "server_error", "", 1};
    const Clock::time_point deadline = params.deadline;
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
    // The scheduler enforces the deadline; the grace covers a step in progress.
    const Clock::time_point give_up =
        deadline == Clock::time_point::max() ? deadline : deadline + std::chrono::seconds(5);
    while (!job->take(first, std::chrono::milliseconds(100))) {
        if (Clock::now() >= give_up) {
            job->cancel();
            throw HttpError{504, "the request timed out", "", "server_error", "timeout"};
        }
    }
    const GenEvent& e = first->front();
    if (e.kind == GenEvent::Kind::Error) {
        const bool client = e.status >= 400 && e.status < 500;
        throw HttpError{e.status, e.error, "", client ? "invalid_request_error" : "server_error"};
    }
    return job;
}

void respond(httplib::Response& res, Server& server, std::shared_ptr<Job> job, std::vector<GenEvent> first,
             std::shared_ptr<Formatter> f, bool stream, HandoffPlan plan) {
    auto driver = std::make_shared<Driver>(std::move(job), std::move(first), f, stream, std::move(plan));
    res.status = 200;
    if (stream) res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        f->content_type(stream), [driver](size_t, httplib::DataSink& sink) { return driver->run(sink); },
        [driver](bool) { driver->cancel(); });
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
