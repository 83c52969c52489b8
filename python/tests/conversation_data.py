"""Deterministic test conversations and tool lists of given sizes (shared by the Python tests and
the long-session regression scenario)."""
import json

_TOPICS = ["the history of bridges", "how tides work", "growing tomatoes", "the rules of chess",
           "volcanoes in Iceland", "baking sourdough bread", "the water cycle", "learning to swim",
           "how compilers work", "migratory birds", "the printing press", "solar panels"]


def make_tools(count=20, target_chars=19600):
    """count OpenAI-style tool definitions whose JSON totals about target_chars characters."""
    tools = []
    per_tool = target_chars // count
    for i in range(count):
        name = "tool_%02d_%s" % (i, ["search", "weather", "calendar", "email", "maps"][i % 5])
        tool = {
            "type": "function",
            "function": {
                "name": name,
                "description": "",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "What to look up or act on."},
                        "limit": {"type": "integer", "description": "The most results to return."},
                        "units": {"type": "string", "enum": ["metric", "imperial"],
                                  "description": "Unit system for any measurements."},
                        "when": {"type": "string", "description": "An ISO 8601 date or time."},
                    },
                    "required": ["query"],
                },
            },
        }
        base = len(json.dumps(tool))
        filler = ("Performs operation %d for the user, with careful validation of every field. " % i)
        description = (filler * 40)[:max(10, per_tool - base)]
        tool["function"]["description"] = description
        tools.append(tool)
    return tools


def make_conversation(target_chars, render=None):
    """A system message and alternating user/assistant turns ending with a user turn, grown until the
    rendered prompt (render(messages) -> str, or the raw JSON size when render is None) reaches
    target_chars."""
    messages = [{"role": "system", "content": "You are a helpful assistant. Answer briefly and accurately."}]
    size = lambda m: len(render(m)) if render else len(json.dumps(m))
    turn = 0
    while True:
        topic = _TOPICS[turn % len(_TOPICS)]
        user = {"role": "user", "content": "Tell me something interesting about %s (question %d)." % (topic, turn)}
        if size(messages + [user]) >= target_chars:
            messages.append(user)
            return messages
        messages.append(user)
        messages.append({"role": "assistant",
                         "content": ("Here is a fact about %s: it has a long and surprising history, "
                                     "and people have studied it for centuries. " % topic) * 3})
        turn += 1
