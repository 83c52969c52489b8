"""The espeak-ng speech set: 60 varied sentences spoken by a few voices at a few speeds, 16 kHz mono
16-bit WAV, generated on first use into ~/.cache/cactus/audio/espeak (Debian espeak-ng + sox)."""
import os
import re
import subprocess

CACHE = os.path.expanduser(os.environ.get("CACTUS_AUDIO_CACHE", "~/.cache/cactus/audio/espeak"))

SENTENCES = [
    "The birch canoe slid on the smooth planks.",
    "Glue the sheet to the dark blue background.",
    "It's easy to tell the depth of a well.",
    "These days a chicken leg is a rare dish.",
    "Rice is often served in round bowls.",
    "The juice of lemons makes fine punch.",
    "The box was thrown beside the parked truck.",
    "The hogs were fed chopped corn and garbage.",
    "Four hours of steady work faced us.",
    "A large size in stockings is hard to sell.",
    "The boy was there when the sun rose.",
    "A rod is used to catch pink salmon.",
    "The source of the huge river is the clear spring.",
    "Kick the ball straight and follow through.",
    "Help the woman get back to her feet.",
    "A pot of tea helps to pass the evening.",
    "Smoky fires lack flame and heat.",
    "The soft cushion broke the man's fall.",
    "The salt breeze came across from the sea.",
    "The girl at the booth sold fifty bonds.",
    "The small pup gnawed a hole in the sock.",
    "The fish twisted and turned on the bent hook.",
    "Press the pants and sew a button on the vest.",
    "The swan dive was far short of perfect.",
    "The beauty of the view stunned the young boy.",
    "Two blue fish swam in the tank.",
    "Her purse was full of useless trash.",
    "The colt reared and threw the tall rider.",
    "It snowed, rained, and hailed the same morning.",
    "Read verse out loud for pleasure.",
    "Hoist the load to your left shoulder.",
    "Take the winding path to reach the lake.",
    "Note closely the size of the gas tank.",
    "Wipe the grease off his dirty face.",
    "Mend the coat before you go out.",
    "The wrist was badly strained and hung limp.",
    "The stray cat gave birth to kittens.",
    "The young girl gave no clear response.",
    "The meal was cooked before the bell rang.",
    "What joy there is in living.",
    "Our meeting is scheduled for Tuesday at three in the afternoon.",
    "Please send the quarterly report to the finance team by Friday.",
    "The train to Boston leaves from platform nine every hour.",
    "My phone battery died in the middle of the call.",
    "She planted tomatoes, peppers and basil in the garden.",
    "The museum opens at ten and closes at six.",
    "We need more coffee, milk and sugar for the office.",
    "The weather forecast predicts heavy rain this weekend.",
    "He learned to play the piano when he was seven years old.",
    "Turn left at the second traffic light and park near the bank.",
    "The library has thousands of books about history and science.",
    "Can you help me carry these boxes upstairs?",
    "The doctor told him to drink more water and rest.",
    "Our flight was delayed by two hours because of fog.",
    "The children built a sandcastle on the beach.",
    "I would like a table for four near the window.",
    "The computer restarted after installing the update.",
    "Fresh bread smells wonderful in the morning.",
    "The river flows slowly through the quiet valley.",
    "Remember to lock the door when you leave the house.",
]

VOICES = [("en-us", 160), ("en", 150), ("en-us+f3", 170), ("en+m3", 140)]


def clip_path(i):
    return os.path.join(CACHE, f"espeak_{i:02d}.wav")


def ensure_clips(indices):
    """Speaks the sentences of `indices` (cached); returns [(wav path, sentence)]."""
    os.makedirs(CACHE, exist_ok=True)
    out = []
    for i in indices:
        path = clip_path(i)
        if not os.path.exists(path):
            voice, speed = VOICES[i % len(VOICES)]
            raw = path + ".raw.wav"
            subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-w", raw, SENTENCES[i]], check=True)
            subprocess.run(["sox", raw, "-r", "16000", "-c", "1", "-b", "16", path], check=True)
            os.remove(raw)
        out.append((path, SENTENCES[i]))
    return out


def words(text):
    return re.sub(r"[^a-z0-9' ]+", " ", text.lower().replace("-", " ")).split()


def edit_distance(a, b):
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


def wer(refs, hyps):
    errors = sum(edit_distance(words(r), words(h)) for r, h in zip(refs, hyps))
    return errors / max(1, sum(len(words(r)) for r in refs))
