"""Deterministic tool-use and JSON-schema requests for the Qwen2.5-Coder tests: a pool of tools with
nested argument schemas, 50 tool requests (1-20 tools offered, some asking for parallel calls) grouped
by tool set so the session reuses the prompt prefix, and 30 JSON-schema extraction requests."""
import random

S = {"type": "string", "maxLength": 40}


def fn(name, description, properties, required, defs=None):
    params = {"type": "object", "properties": properties, "required": required}
    if defs:
        params["$defs"] = defs
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


TOOLS = [
    fn("get_weather", "Get the current weather for a city", {"city": S, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, ["city"]),
    fn("search_web", "Search the web", {"query": S, "max_results": {"type": "integer", "minimum": 1, "maximum": 10}}, ["query"]),
    fn("send_email", "Send an email", {"to": {"type": "array", "items": S, "minItems": 1, "maxItems": 3}, "subject": S, "body": S}, ["to", "subject"]),
    fn("create_event", "Create a calendar event", {"title": S, "start": {"type": "object", "properties": {"date": S, "time": S}, "required": ["date"]},
       "attendees": {"type": "array", "maxItems": 3, "items": {"$ref": "#/$defs/person"}}}, ["title", "start"],
       {"person": {"type": "object", "properties": {"name": S, "email": S}, "required": ["name"]}}),
    fn("convert_currency", "Convert an amount between currencies", {"amount": {"type": "number"}, "from_currency": {"type": "string", "enum": ["USD", "EUR", "JPY", "GBP"]},
       "to_currency": {"type": "string", "enum": ["USD", "EUR", "JPY", "GBP"]}}, ["amount", "from_currency", "to_currency"]),
    fn("set_alarm", "Set an alarm", {"time": S, "days": {"type": "array", "maxItems": 7, "items": {"type": "string", "enum": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]}}}, ["time"]),
    fn("book_flight", "Book a flight", {"origin": S, "destination": S, "date": S, "passengers": {"type": "object", "properties": {
       "adults": {"type": "integer", "minimum": 1, "maximum": 9}, "children": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["adults"]}}, ["origin", "destination", "date"]),
    fn("translate_text", "Translate text to another language", {"text": S, "target_language": S}, ["text", "target_language"]),
    fn("calculate", "Evaluate a math expression", {"expression": S}, ["expression"]),
    fn("get_stock_price", "Get the latest stock price", {"symbol": {"type": "string", "maxLength": 8}}, ["symbol"]),
    fn("play_music", "Play a song", {"song": S, "artist": S, "volume": {"type": "integer", "minimum": 0, "maximum": 100}}, ["song"]),
    fn("add_todo", "Add an item to the todo list", {"item": S, "priority": {"type": "string", "enum": ["low", "medium", "high"]},
       "tags": {"type": "array", "maxItems": 3, "items": S}}, ["item"]),
    fn("lookup_contact", "Find a contact by name", {"name": S}, ["name"]),
    fn("order_food", "Order food from a restaurant", {"restaurant": S, "items": {"type": "array", "minItems": 1, "maxItems": 4, "items": {
       "type": "object", "properties": {"name": S, "quantity": {"type": "integer", "minimum": 1, "maximum": 20}}, "required": ["name", "quantity"]}}}, ["restaurant", "items"]),
    fn("get_directions", "Get directions between two places", {"origin": S, "destination": S, "mode": {"type": "string", "enum": ["driving", "walking", "transit"]}}, ["origin", "destination"]),
    fn("set_thermostat", "Set the thermostat", {"temperature": {"type": "number"}, "room": S}, ["temperature"]),
    fn("create_note", "Create a note", {"title": S, "content": S}, ["title", "content"]),
    fn("get_news", "Get news headlines on a topic", {"topic": S, "count": {"type": "integer", "minimum": 1, "maximum": 10}}, ["topic"]),
    fn("reserve_table", "Reserve a restaurant table", {"restaurant": S, "party_size": {"type": "integer", "minimum": 1, "maximum": 20}, "time": S}, ["restaurant", "party_size"]),
    fn("track_package", "Track a package", {"tracking_number": S}, ["tracking_number"]),
    fn("turn_on_lights", "Turn on the lights in a room", {"room": S, "brightness": {"type": "integer", "minimum": 0, "maximum": 100}}, ["room"]),
    fn("get_time", "Get the current time in a timezone", {"timezone": S}, ["timezone"]),
]

BY_NAME = {t["function"]["name"]: t for t in TOOLS}

# (tool names the request needs, the user's words)
ASKS = [
    (["get_weather"], "What's the weather in Paris right now?"),
    (["get_weather", "get_weather"], "What's the weather in Tokyo and in Berlin?"),
    (["search_web"], "Search the web for the best hiking trails near Denver, just 3 results."),
    (["send_email"], "Email bob@example.com with subject 'Lunch' and say I'm running late."),
    (["create_event"], "Create a calendar event 'Team sync' on 2025-03-14 at 10:00 with Alice and Bob."),
    (["convert_currency"], "Convert 250 US dollars to euros."),
    (["set_alarm"], "Set an alarm for 6:30 on weekdays."),
    (["book_flight"], "Book a flight from Boston to Lisbon on 2025-06-01 for 2 adults and 1 child."),
    (["translate_text"], "Translate 'good morning' into Spanish."),
    (["calculate"], "What is 17 * 23 + 4?"),
    (["get_stock_price", "get_stock_price"], "Get the stock prices of AAPL and MSFT."),
    (["play_music"], "Play Bohemian Rhapsody by Queen at volume 40."),
    (["add_todo"], "Add 'buy milk' to my todo list with high priority."),
    (["lookup_contact"], "Find the contact details for Maria Garcia."),
    (["order_food"], "Order two margherita pizzas and one salad from Luigi's."),
    (["get_directions"], "How do I walk from the Louvre to the Eiffel Tower?"),
    (["set_thermostat"], "Set the living room thermostat to 21.5 degrees."),
    (["create_note"], "Make a note titled 'Ideas' saying 'build a birdhouse'."),
    (["get_news"], "Show me 5 news headlines about electric cars."),
    (["reserve_table"], "Reserve a table for 4 at Nobu at 8pm."),
    (["track_package"], "Where is my package 1Z999AA10123456784?"),
    (["turn_on_lights", "set_thermostat"], "Turn on the kitchen lights and set the thermostat to 20 degrees."),
    (["get_time", "get_weather"], "What time is it in Tokyo, and what's the weather there?"),
    (["get_weather", "convert_currency"], "What's the weather in London, and convert 100 GBP to USD."),
    (["search_web", "get_news"], "Search the web for 'rust async' and get news about Rust."),
]

SIZES = [1, 2, 3, 5, 8, 12, 16, 20, 20, 10]  # tools offered per group; 10 groups x 5 requests


def tool_requests(seed=16):
    """50 requests as (tools, messages, expected_names), in groups that share one tool list."""
    rng = random.Random(seed)
    asks = list(ASKS) * 2
    rng.shuffle(asks)
    out = []
    for g, size in enumerate(SIZES):
        group = asks[g * 5:(g + 1) * 5]
        needed = sorted({n for names, _ in group for n in names})
        others = [n for n in BY_NAME if n not in needed]
        rng.shuffle(others)
        names = needed + others[:max(0, size - len(needed))]
        if len(names) > size:  # small groups: keep only requests the tools cover
            names = names[:max(size, 1)]
        rng.shuffle(names)
        tools = [BY_NAME[n] for n in names]
        for wanted, text in group:
            if not set(wanted) <= set(names):
                wanted, text = ([names[0]], "Please use the %s tool for me." % names[0].replace("_", " "))
            out.append((tools, [{"role": "user", "content": text}], wanted))
    return out


SCHEMA_CASES = [
    ({"type": "object", "properties": {"name": S, "age": {"type": "integer", "minimum": 0, "maximum": 150}}, "required": ["name", "age"], "additionalProperties": False},
     "Alice is 31 years old."),
    ({"type": "object", "properties": {"city": S, "country": S, "population_millions": {"type": "number"}}, "required": ["city", "country"], "additionalProperties": False},
     "Tokyo, Japan has about 14 million people."),
    ({"type": "object", "properties": {"sentiment": {"type": "string", "enum": ["positive", "negative", "neutral"]}, "confidence": {"type": "number", "minimum": 0, "maximum": 1}},
      "required": ["sentiment", "confidence"], "additionalProperties": False}, "I absolutely loved the movie!"),
    ({"type": "object", "properties": {"items": {"type": "array", "maxItems": 5, "items": {"type": "object", "properties": {"name": S, "qty": {"type": "integer", "minimum": 1, "maximum": 99}},
      "required": ["name", "qty"], "additionalProperties": False}}}, "required": ["items"], "additionalProperties": False}, "Two apples, three pears and one melon."),
    ({"type": "object", "properties": {"title": S, "tags": {"type": "array", "items": S, "maxItems": 4}, "published": {"type": "boolean"}}, "required": ["title", "tags", "published"],
      "additionalProperties": False}, "A published post called 'Rust tips' about rust and performance."),
    ({"type": "object", "properties": {"person": {"$ref": "#/$defs/person"}, "manager": {"anyOf": [{"$ref": "#/$defs/person"}, {"type": "null"}]}},
      "required": ["person", "manager"], "additionalProperties": False,
      "$defs": {"person": {"type": "object", "properties": {"first": S, "last": S}, "required": ["first", "last"], "additionalProperties": False}}},
     "John Smith reports to Jane Doe."),
]

SCHEMA_TEXTS = [
    "Bob is 45 years old.", "Paris, France has about 2.1 million people.", "This product is terrible.",
    "Five bananas and two kiwis.", "A draft post called 'Hello' about intro.", "Ana Lima reports to nobody.",
    "Carlos is 8.", "Cairo, Egypt, 10 million.", "It was fine, nothing special.", "One cake.",
    "Unpublished note 'TODO' tagged work, home.", "Li Wei reports to Sam Park.", "Dana, 27.",
    "Lagos, Nigeria: 15 million residents.", "Best day ever!", "Ten eggs, one bread, two milk.",
    "A published article 'Kernels' tagged simd.", "Eva Novak reports to Petr Novak.", "Grandpa Joe is 92.",
    "Oslo, Norway, 0.7 million.", "Meh.", "Three socks.", "Draft 'Notes' tagged misc.", "Kim Lee reports to nobody.",
]


def schema_requests():
    """30 (schema, messages): the six schemas, each with five texts."""
    out = []
    for i, (schema, example) in enumerate(SCHEMA_CASES):
        texts = [example] + SCHEMA_TEXTS[i::6][:4]
        for text in texts:
            out.append((schema, [{"role": "system", "content": "Extract the data as JSON."}, {"role": "user", "content": text}]))
    return out
