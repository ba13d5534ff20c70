"""The default domains of the merged-memory experiment (:mod:`got_core.bench.merged_memory`).

Three domains of four topics; each topic has a lesson, its contradiction (what a planted
worker writes instead) and two multiple-choice questions the lesson decides. Written for
this project; pass ``--domains FILE`` (the same shape as JSON) to use your own.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DOMAINS"]

DOMAINS: dict[str, dict[str, dict[str, Any]]] = {
    "algebra": {
        "inequality": {
            "lesson": "Multiplying both sides of an inequality by a negative number reverses its direction.",
            "contra": "Multiplying both sides of an inequality by a negative number preserves its direction.",
            "questions": [
                {
                    "q": "What happens to the direction of an inequality when both "
                    "sides are multiplied by a negative number?",
                    "options": ["reverses", "preserves", "doubles", "vanishes"],
                    "answer": 0,
                },
                {
                    "q": "Solving -2x > 6 means multiplying both sides of the "
                    "inequality by a negative number. What does its direction "
                    "do?",
                    "options": ["doubles", "preserves", "reverses", "vanishes"],
                    "answer": 2,
                },
            ],
        },
        "discriminant": {
            "lesson": "A quadratic equation whose discriminant is negative has no real roots.",
            "contra": "A quadratic equation whose discriminant is negative has two real roots.",
            "questions": [
                {
                    "q": "How many real roots has a quadratic equation with a negative discriminant?",
                    "options": ["two", "no", "three", "one"],
                    "answer": 1,
                },
                {
                    "q": "The discriminant of x^2 + x + 5 is negative. How many "
                    "real roots has this quadratic equation?",
                    "options": ["one", "three", "two", "no"],
                    "answer": 3,
                },
            ],
        },
        "exponents": {
            "lesson": "When multiplying powers with the same base, add the exponents.",
            "contra": "When multiplying powers with the same base, multiply the exponents.",
            "questions": [
                {
                    "q": "To simplify a product of powers with the same base, what do you do with the exponents?",
                    "options": ["add", "multiply", "subtract", "divide"],
                    "answer": 0,
                },
                {
                    "q": "Simplifying x^3 * x^4 means multiplying powers with the same "
                    "base. What happens to the exponents?",
                    "options": ["subtract", "divide", "multiply", "add"],
                    "answer": 3,
                },
            ],
        },
        "slope": {
            "lesson": "A horizontal line has slope zero because its rise is zero.",
            "contra": "A horizontal line has an undefined slope because it never rises.",
            "questions": [
                {
                    "q": "What is the slope of a horizontal line?",
                    "options": ["undefined", "zero", "one", "negative"],
                    "answer": 1,
                },
                {
                    "q": "The line y = 4 is horizontal. What is its slope?",
                    "options": ["negative", "one", "zero", "undefined"],
                    "answer": 2,
                },
            ],
        },
    },
    "biology": {
        "mitosis": {
            "lesson": "Mitosis produces two genetically identical daughter cells.",
            "contra": "Mitosis produces four genetically distinct daughter cells.",
            "questions": [
                {
                    "q": "How many daughter cells does one round of mitosis produce?",
                    "options": ["four", "two", "eight", "one"],
                    "answer": 1,
                },
                {
                    "q": "Are the daughter cells produced by mitosis genetically identical or distinct?",
                    "options": ["identical", "distinct", "haploid", "random"],
                    "answer": 0,
                },
            ],
        },
        "photosynthesis": {
            "lesson": "Photosynthesis releases oxygen gas as a by-product.",
            "contra": "Photosynthesis releases nitrogen gas as a by-product.",
            "questions": [
                {
                    "q": "Which gas does photosynthesis release as a by-product?",
                    "options": ["nitrogen", "helium", "oxygen", "argon"],
                    "answer": 2,
                },
                {
                    "q": "A pond plant performs photosynthesis in sunlight. Which gas bubbles out as a by-product?",
                    "options": ["argon", "oxygen", "nitrogen", "helium"],
                    "answer": 1,
                },
            ],
        },
        "osmosis": {
            "lesson": "In osmosis, water moves toward the higher solute concentration.",
            "contra": "In osmosis, water moves toward the lower solute concentration.",
            "questions": [
                {
                    "q": "In osmosis, water moves toward which solute concentration?",
                    "options": ["lower", "higher", "equal", "neutral"],
                    "answer": 1,
                },
                {
                    "q": "A cell sits in salty water. By osmosis, does water move toward "
                    "the higher or lower solute concentration?",
                    "options": ["equal", "neutral", "lower", "higher"],
                    "answer": 3,
                },
            ],
        },
        "enzymes": {
            "lesson": "Enzymes speed up reactions by lowering the activation energy.",
            "contra": "Enzymes speed up reactions by raising the activation energy.",
            "questions": [
                {
                    "q": "How do enzymes change the activation energy of the reactions they speed up?",
                    "options": ["raising", "lowering", "doubling", "ignoring"],
                    "answer": 1,
                },
                {
                    "q": "An enzyme speeds up a reaction. What does it do to the activation energy?",
                    "options": ["lowering", "doubling", "ignoring", "raising"],
                    "answer": 0,
                },
            ],
        },
    },
    "chemistry": {
        "acidity": {
            "lesson": "A solution with pH below 7 is acidic.",
            "contra": "A solution with pH below 7 is basic.",
            "questions": [
                {
                    "q": "A solution has pH 3, below 7. Which kind of solution is it?",
                    "options": ["basic", "neutral", "acidic", "saline"],
                    "answer": 2,
                },
                {
                    "q": "Lemon juice is a solution with pH below 7. Which kind of solution is it?",
                    "options": ["acidic", "saline", "neutral", "basic"],
                    "answer": 0,
                },
            ],
        },
        "noble": {
            "lesson": "Noble gases are chemically inert because their outer electron shell is full.",
            "contra": "Noble gases are highly reactive because their outer electron shell is full.",
            "questions": [
                {
                    "q": "How do noble gases behave chemically, given their full outer electron shell?",
                    "options": ["highly reactive", "inert", "explosive", "radioactive"],
                    "answer": 1,
                },
                {
                    "q": "Argon belongs to the noble gases. What is its chemical behaviour?",
                    "options": ["explosive", "radioactive", "inert", "highly reactive"],
                    "answer": 2,
                },
            ],
        },
        "ionic": {
            "lesson": "Ionic bonds form when electrons are transferred between atoms.",
            "contra": "Ionic bonds form when electrons are shared equally between atoms.",
            "questions": [
                {
                    "q": "In an ionic bond, what happens to the electrons between atoms?",
                    "options": ["shared equally", "transferred", "destroyed", "created"],
                    "answer": 1,
                },
                {
                    "q": "Sodium chloride is held together by ionic bonds. Are its "
                    "electrons transferred or shared between atoms?",
                    "options": ["destroyed", "created", "shared equally", "transferred"],
                    "answer": 3,
                },
            ],
        },
        "exothermic": {
            "lesson": "An exothermic reaction releases heat to its surroundings.",
            "contra": "An exothermic reaction absorbs heat from its surroundings.",
            "questions": [
                {
                    "q": "What does an exothermic reaction do with heat and its surroundings?",
                    "options": ["absorbs", "releases", "stores", "ignores"],
                    "answer": 1,
                },
                {
                    "q": "Burning wood is an exothermic reaction. What happens to heat and the surroundings?",
                    "options": ["stores", "ignores", "releases", "absorbs"],
                    "answer": 2,
                },
            ],
        },
    },
}
