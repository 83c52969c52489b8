#pragma once
// From a job's events to an HTTP response. A Formatter knows one protocol's shapes (OpenAI chat,
// OpenAI text completion, Ollama chat, Ollama generate); respond() drives any of them, streamed
// (SSE or NDJSON) or whole, with the confidence check and the cloud hand-off in between: the
// first tokens are held back until their mean probability is known; below the threshold the
// hand-off endpoint answers instead and the local job is cancelled; if the endpoint fails, the
// held tokens go out and the answer carries a note.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "job.h"

namespace httplib {
struct Response;
}

namespace cactus::server {

class Server;

// Everything a response needs, from the local job or from the hand-off endpoint.
struct Completion {
    std::string text;
    std::vector<TokenInfo> tokens;
    std::string finish_reason = "stop";  // OpenAI's: stop, length (timeouts and cancels map to length)
    std::string stop_word;  // the stop sequence that ended the reply, if one did (Anthropic's stop_sequence)
    GenStats stats;
    bool failed = false;
    int error_status = 0;
    std::string error;
    // Hand-off
    bool cloud = false;
    std::string cloud_reason;             // why it was handed off
    std::string handoff_error;            // set when a hand-off was tried and fell back to the local answer
    nlohmann::ordered_json cloud_answer;  // the endpoint's whole response
    double confidence = 0.0;              // mean probability of the first tokens (0 when not measured)
};

class Formatter {
public:
    virtual ~Formatter() = default;
    virtual std::string content_type(bool stream) const = 0;
    virtual std::string stream_start() { return std::string(); }
    // Text completed by one or more tokens (streaming only).
    virtual std::string stream_piece(const std::string& text, const std::vector<TokenInfo>& tokens) = 0;
    virtual std::string stream_end(const Completion& c) = 0;
    virtual std::string stream_error(int status, const std::string& message) = 0;
    // Every event of the local job, before it is handled (llama-server's native shape reports the
    // slot, counts and timings in each chunk).
    virtual void observe(const GenEvent&) {}
    // A Progress event (streaming only; the job asked for them).
    virtual std::string stream_progress(const GenEvent&) { return std::string(); }
    virtual std::string whole(const Completion& c) = 0;

    // Several choices of one request (`n` > 1, OpenAI's formats): each choice has its formatter,
    // which writes `choice` as its index; its stream_end then leaves the usage and the end marker
    // to stream_close, written once after every choice ended, with the choices' summed usage.
    size_t choice = 0;
    bool closes_stream = true;
    virtual std::string stream_close(const Completion& total) {
        (void)total;
        return std::string();
    }
};

struct HandoffPlan {
    bool check_confidence = false;
    double threshold = 0.0;
    size_t tokens = 8;
    // Sends the request to the endpoint; fills c (cloud fields, text, finish_reason) or *error.
    std::function<bool(Completion* c, std::string* error)> call;
};

// Queues params; waits for the first event (the request's deadline bounds the wait). Throws
// HttpError: 429 when the queue is full, 503 while draining, or the job's error.
std::shared_ptr<Job> start_job(Server& server, GenParams params, std::vector<GenEvent>* first);

// Queues one job per params (choices of one request) and waits for the first event of each; the
// same errors as start_job (the jobs already queued are cancelled then).
std::vector<std::shared_ptr<Job>> start_jobs(Server& server, std::vector<GenParams> params,
                                             std::vector<std::vector<GenEvent>>* firsts);
// Streams or sends the answers of several choices (formatter i writes job i's, its `choice` i):
// streamed, their chunks interleave as tokens come; whole, one response holds every choice and
// the summed usage. No hand-off.
void respond_choices(httplib::Response& res, std::vector<std::shared_ptr<Job>> jobs,
                     std::vector<std::vector<GenEvent>> firsts, std::vector<std::shared_ptr<Formatter>> fs,
                     bool stream);

// Streams or sends the job's answer through formatter `f`.
void respond(httplib::Response& res, Server& server, std::shared_ptr<Job> job, std::vector<GenEvent> first,
             std::shared_ptr<Formatter> f, bool stream, HandoffPlan plan);
// Sends a completion that needs no local job (a hand-off made before generation).
void respond_done(httplib::Response& res, const Completion& c, std::shared_ptr<Formatter> f, bool stream);

// The mean probability of the tokens (0 for none).
double mean_probability(const std::vector<TokenInfo>& tokens);

}  // namespace cactus::server
