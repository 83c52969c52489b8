/* A three-turn streaming chat written only against the C API (include/cactus/cactus.h).
 * Usage: chat MODEL   (a .gguf path or a known short name such as gemma3-270m)
 * Prints each reply as it streams, then one line of metrics per turn:
 *   turn N: prefill_tokens=P decode_tokens=D */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cactus/cactus.h"

static void on_token(const char* token, uint32_t token_id, void* user_data) {
    (void)token_id;
    int* pieces = (int*)user_data;
    ++*pieces;
    fputs(token, stdout);
    fflush(stdout);
}

/* Appends a JSON string literal of text to out (escaping quotes, backslashes, control chars). */
static void append_json_string(char* out, size_t cap, const char* text) {
    size_t n = strlen(out);
    if (n + 2 >= cap) return;
    out[n++] = '"';
    for (const char* p = text; *p && n + 8 < cap; ++p) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\') {
            out[n++] = '\\';
            out[n++] = (char)c;
        } else if (c == '\n') {
            out[n++] = '\\';
            out[n++] = 'n';
        } else if (c < 0x20) {
            n += (size_t)snprintf(out + n, cap - n, "\\u%04x", c);
        } else
            out[n++] = (char)c;
    }
    out[n++] = '"';
    out[n] = '\0';
}

/* Extracts the string value of "key" from a flat response (enough for this example). */
static void json_string_field(const char* json, const char* key, char* out, size_t cap) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
    const char* p = strstr(json, pattern);
    size_t n = 0;
    out[0] = '\0';
    if (!p) return;
    for (p += strlen(pattern); *p && *p != '"' && n + 1 < cap; ++p) {
        if (*p == '\\' && p[1]) {
            ++p;
            out[n++] = *p == 'n' ? '\n' : *p;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
}

static long json_int_field(const char* json, const char* key) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char* p = strstr(json, pattern);
    return p ? strtol(p + strlen(pattern), NULL, 10) : -1;
}

int main(int argc, char** argv) {
    const char* model_path = argc > 1 ? argv[1] : "gemma3-270m";
    const char* questions[3] = {"What is the capital of France?", "And of Germany?", "Which of the two is larger?"};
    static char messages[65536] = "[";
    static char response[1 << 20];
    char reply[16384];
    cactus_model_t model = cactus_init(model_path, NULL, false);
    if (!model) {
        fprintf(stderr, "cactus_init failed: %s\n", cactus_get_last_error());
        return 1;
    }
    for (int turn = 0; turn < 3; ++turn) {
        if (turn > 0) strcat(messages, ",");
        strcat(messages, "{\"role\":\"user\",\"content\":");
        append_json_string(messages, sizeof messages, questions[turn]);
        strcat(messages, "}]");
        int pieces = 0;
        printf("user: %s\nassistant: ", questions[turn]);
        int rc = cactus_complete(model, messages, response, sizeof response, "{\"max_tokens\":48,\"temperature\":0}",
                                 NULL, on_token, &pieces, NULL, 0);
        printf("\n");
        if (rc < 0) {
            fprintf(stderr, "cactus_complete failed: %s\n", cactus_get_last_error());
            cactus_destroy(model);
            return 1;
        }
        json_string_field(response, "response", reply, sizeof reply);
        printf("turn %d: prefill_tokens=%ld decode_tokens=%ld streamed_pieces=%d\n", turn + 1,
               json_int_field(response, "prefill_tokens"), json_int_field(response, "decode_tokens"), pieces);
        messages[strlen(messages) - 1] = '\0'; /* drop ']' */
        strcat(messages, ",{\"role\":\"assistant\",\"content\":");
        append_json_string(messages, sizeof messages, reply);
        strcat(messages, "}");
    }
    cactus_destroy(model);
    return 0;
}
