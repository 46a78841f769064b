"""Build `items.jsonl`, the labelled math accuracy corpus (see CARD.md for sources and labels).

Two parts: hand-written items (`HAND`: one per line, label written beside each by the author, an LLM
judge, reading the item) and items derived from MATH-500 / GSM8K reference solutions, whose final
answer is restated in the forms models write (correct: the reference's own solution and answer;
wrong: the same solution ending in another problem's different answer, or GSM8K's answer off by one).
Deterministic: `python datasets/accuracy/math/build.py` rewrites the same file.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
REFERENCE = HERE.parent.parent / "reference"

VEC = "\\begin{pmatrix} 1 \\\\ -2 \\end{pmatrix}"
COL3 = "\\begin{pmatrix} 3 \\\\ -1 \\\\ 2 \\end{pmatrix}"
# (class, shape, reference answer, model's final answer as written, label 1 = correct / 0 = wrong, problem)
HAND = [
    # text answers
    ("text", "MATH", "\\text{stopped}", "The car stopped.", 1, "What happened to the car after 5 seconds?"),
    ("text", "MATH", "\\text{stopped}", "It never stopped", 0, "What happened to the car after 5 seconds?"),
    ("text", "MATH", "\\text{Evelyn}", "Evelyn", 1, "Which student has the greatest average speed?"),
    ("text", "MATH", "\\text{Evelyn}", "\\text{Angela}", 0, "Which student has the greatest average speed?"),
    ("text", "MATH", "\\text{odd}", "\\text{Odd}", 1, "Is f(x) even, odd, or neither?"),
    ("text", "MATH", "\\text{odd}", "\\text{neither}", 0, "Is f(x) even, odd, or neither?"),
    ("text", "MATH", "\\text{east}", "the east", 1, "In which direction is the bird flying?"),
    ("text", "MATH", "\\text{east}", "\\text{west}", 0, "In which direction is the bird flying?"),
    ("text", "Polaris", "\\text{Yes}", "yes", 1, "Is 1001 divisible by 7?"),
    ("text", "Polaris", "\\text{Yes}", "no", 0, "Is 1001 divisible by 7?"),
    ("text", "OlympiadBench", "\\text{Tuesday}", "Tuesday", 1, "What day is 100 days after a Friday?"),
    ("text", "OlympiadBench", "\\text{Tuesday}", "\\text{Wednesday}", 0, "What day is 100 days after a Friday?"),
    # multiple choice: letters against option text
    ("choice", "MATH", "\\text{(C)}", "C", 1, "Which option is correct? (A) 1 (B) 2 (C) 3"),
    ("choice", "MATH", "\\text{(C)}", "(B)", 0, "Which option is correct? (A) 1 (B) 2 (C) 3"),
    ("choice", "Polaris", "B", "(B) $2\\sqrt{2}$", 1, "Choose: (A) 2 (B) 2\\sqrt2 (C) 4"),
    ("choice", "Polaris", "B", "(C) 4", 0, "Choose: (A) 2 (B) 2\\sqrt2 (C) 4"),
    ("choice", "OlympiadBench", "(B) 2\\sqrt{2}", "2\\sqrt{2}", 1, "Choose: (A) 2 (B) 2\\sqrt2 (C) 4"),
    ("choice", "OlympiadBench", "(B) 2\\sqrt{2}", "4", 0, "Choose: (A) 2 (B) 2\\sqrt2 (C) 4"),
    ("choice", "MATH", "\\text{(E)}", "\\textbf{(E)}", 1, "Which is largest? (A)...(E)"),
    ("choice", "MATH", "\\text{(E)}", "\\textbf{(D)}", 0, "Which is largest? (A)...(E)"),
    ("choice", "DeepMath", "A", "A", 1, "Which of the statements is true? (A) ... (D)"),
    ("choice", "DeepMath", "A", "D", 0, "Which of the statements is true? (A) ... (D)"),
    # labelled multi-part and tuples: every part must match
    ("parts", "MATH", "16,3,1,1", "w=16, d=3, a=1, b=1", 1, "Find w, d, a, b."),
    ("parts", "MATH", "16,3,1,1", "w=16, d=3, a=2, b=1", 0, "Find w, d, a, b."),
    ("parts", "MATH", "12 \\text{ red}, 7 \\text{ blue}", "12", 0, "How many red and how many blue marbles?"),
    ("parts", "MATH", "12 \\text{ red}, 7 \\text{ blue}", "12, 7", 1, "How many red and how many blue marbles?"),
    ("parts", "OlympiadBench", "3, 5, 7", "3", 0, "Find all primes p such that p, p+2, p+4 are prime."),
    ("parts", "OlympiadBench", "3, 5, 7", "7, 5, 3", 1, "List all the values."),
    ("parts", "OlympiadBench", "3, 5, 7", "3, 5", 0, "List all the values."),
    ("parts", "MATH", "(12,7,8)", "12, 7, 8", 1, "Give the ordered triple (a,b,c)."),
    ("parts", "MATH", "(12,7,8)", "12, 5, 9", 0, "Give the ordered triple (a,b,c)."),
    ("parts", "MATH", "a=2, b=-3", "b=-3, a=2", 1, "Find a and b."),
    ("parts", "MATH", "a=2, b=-3", "a=-3, b=2", 0, "Find a and b."),
    ("parts", "MATH", "2, -3", "x=2 \\text{ or } x=-3", 1, "Solve x^2+x-6=0."),
    ("parts", "MATH", "2, -3", "x=2", 0, "Solve x^2+x-6=0."),
    ("parts", "Polaris", "1,-2", "x = -2, x = 1", 1, "Find all real roots."),
    ("parts", "Polaris", "1,-2", "x = -1, x = 2", 0, "Find all real roots."),
    ("parts", "DeepMath", "(1, 2)", "(2, 1)", 0, "Find the ordered pair (x, y)."),
    ("parts", "DeepMath", "(1, 2)", "(1,2)", 1, "Find the ordered pair (x, y)."),
    # sets
    ("set", "MATH", "\\{1,2,3\\}", "3, 2, 1", 1, "Find the set of solutions."),
    ("set", "MATH", "\\{1,2,3\\}", "\\{1, 2\\}", 0, "Find the set of solutions."),
    ("set", "OlympiadBench", "\\{-1, 4\\}", "\\{4, -1\\}", 1, "Find all x."),
    ("set", "OlympiadBench", "\\{-1, 4\\}", "-1, 4, 5", 0, "Find all x."),
    # equations vs expressions; variable renaming
    ("equation", "MATH", "f(x)=x", "f(z)=z", 1, "Find all functions f."),
    ("equation", "MATH", "f(x)=x", "f(z)=2z", 0, "Find all functions f."),
    ("equation", "MATH", "\\frac{6}{x}", "xy = 6", 1, "Express y in terms of x."),
    ("equation", "MATH", "\\frac{6}{x}", "xy = 3", 0, "Express y in terms of x."),
    ("equation", "MATH", "y=2x+3", "2x+3", 1, "Find the equation of the line."),
    ("equation", "MATH", "y=2x+3", "2x-3", 0, "Find the equation of the line."),
    ("equation", "Polaris", "y=2x+3", "2x - y + 3 = 0", 1, "Find the equation of the line."),
    ("equation", "Polaris", "y=2x+3", "2x + y + 3 = 0", 0, "Find the equation of the line."),
    ("equation", "DeepMath", "x=5", "5", 1, "Solve for x."),
    ("equation", "DeepMath", "x=5", "x=-5", 0, "Solve for x."),
    ("equation", "OlympiadBench", "f(x)=x^2+1", "f(t) = t^2 + 1", 1, "Determine f."),
    ("equation", "OlympiadBench", "f(x)=x^2+1", "f(t) = t^2 - 1", 0, "Determine f."),
    # inequalities vs intervals and unions
    ("interval", "MATH", "(-\\infty,-5)", "k < -5", 1, "For which k does the equation have no real roots?"),
    ("interval", "MATH", "(-\\infty,-5)", "k \\le -5", 0, "For which k does the equation have no real roots?"),
    ("interval", "MATH", "[-2,3)", "-2 \\le x < 3", 1, "Solve the inequality."),
    ("interval", "MATH", "[-2,3)", "-2 < x < 3", 0, "Solve the inequality."),
    ("interval", "OlympiadBench", "(-\\infty,-1)\\cup(2,\\infty)", "x<-1 \\text{ or } x>2", 1, "Solve x^2-x-2>0."),
    ("interval", "OlympiadBench", "(-\\infty,-1)\\cup(2,\\infty)", "x<-1 \\text{ or } x>3", 0, "Solve x^2-x-2>0."),
    ("interval", "Polaris", "x > 4", "(4, \\infty)", 1, "Solve 2x > 8."),
    ("interval", "Polaris", "x > 4", "[4, \\infty)", 0, "Solve 2x > 8."),
    ("interval", "DeepMath", "[1, \\infty)", "x \\geq 1", 1, "Find the domain."),
    ("interval", "DeepMath", "[1, \\infty)", "x > 1", 0, "Find the domain."),
    # exact vs rounded reference
    ("rounded", "MATH", "30.52", "\\frac{1587}{52}", 1, "Round to the nearest hundredth."),
    ("rounded", "MATH", "30.52", "\\frac{1577}{52}", 0, "Round to the nearest hundredth."),
    ("rounded", "Polaris", "0.33", "\\frac{1}{3}", 1, "Give the probability to two decimals."),
    ("rounded", "Polaris", "0.33", "\\frac{1}{2}", 0, "Give the probability to two decimals."),
    ("rounded", "DeepMath", "1.41", "\\sqrt{2}", 1, "Approximate to two decimal places."),
    ("rounded", "DeepMath", "1.41", "\\sqrt{3}", 0, "Approximate to two decimal places."),
    ("rounded", "OlympiadBench", "3.142", "\\pi", 1, "To three decimal places."),
    ("rounded", "OlympiadBench", "3.142", "3.1", 0, "To three decimal places."),
    ("rounded", "GSM8K", "2.5", "\\frac{5}{2}", 1, "How many hours?"),
    ("rounded", "GSM8K", "2.5", "\\frac{7}{2}", 0, "How many hours?"),
    # percent vs fraction
    ("percent", "GSM8K", "25\\%", "\\frac{1}{4}", 1, "What percent of the class passed?"),
    ("percent", "GSM8K", "25\\%", "\\frac{1}{5}", 0, "What percent of the class passed?"),
    ("percent", "GSM8K", "25", "25\\%", 1, "What percent of the class passed?"),
    ("percent", "GSM8K", "25", "2.5\\%", 0, "What percent of the class passed?"),
    ("percent", "MATH", "0.4", "40\\%", 1, "What fraction of the area is shaded?"),
    ("percent", "MATH", "0.4", "4\\%", 0, "What fraction of the area is shaded?"),
    ("percent", "Polaris", "12.5\\%", "0.125", 1, "What is the percentage increase?"),
    ("percent", "Polaris", "12.5\\%", "0.0125", 0, "What is the percentage increase?"),
    # degrees vs radians
    ("degrees", "MATH", "30^\\circ", "\\frac{\\pi}{6}", 1, "Find the angle."),
    ("degrees", "MATH", "30^\\circ", "\\frac{\\pi}{3}", 0, "Find the angle."),
    ("degrees", "MATH", "\\frac{\\pi}{2}", "90^\\circ", 1, "Find the angle."),
    ("degrees", "MATH", "\\frac{\\pi}{2}", "45^\\circ", 0, "Find the angle."),
    ("degrees", "OlympiadBench", "120^\\circ", "\\frac{2\\pi}{3}", 1, "Find the angle."),
    ("degrees", "OlympiadBench", "120^\\circ", "\\frac{3\\pi}{2}", 0, "Find the angle."),
    ("degrees", "MATH", "90^\\circ", "90", 1, "Find the angle in degrees."),
    ("degrees", "MATH", "90^\\circ", "60", 0, "Find the angle in degrees."),
    # units written beside the number
    ("units", "GSM8K", "12", "12 \\text{ cm}", 1, "How long is the side?"),
    ("units", "GSM8K", "12", "13 \\text{ cm}", 0, "How long is the side?"),
    ("units", "MATH", "5\\text{ cm}^2", "5", 1, "Find the area."),
    ("units", "MATH", "5\\text{ cm}^2", "6", 0, "Find the area."),
    # plain numbers and expressions of each dataset shape
    ("plain", "GSM8K", "1,000,000", "1000000", 1, "How many?"),
    ("plain", "GSM8K", "18", "\\$18", 1, "How many dollars?"),
    ("plain", "GSM8K", "18", "\\$19", 0, "How many dollars?"),
    ("plain", "MATH", "\\frac{14}{3}", "\\dfrac{14}{3}", 1, "Compute."),
    ("plain", "MATH", "\\frac{14}{3}", "\\frac{3}{14}", 0, "Compute."),
    ("plain", "MATH", "3\\sqrt{13}", "\\sqrt{117}", 1, "Simplify."),
    ("plain", "MATH", "3\\sqrt{13}", "\\sqrt{39}", 0, "Simplify."),
    ("plain", "MATH", "6 - 5i", "6-5i", 1, "Compute."),
    ("plain", "MATH", "6 - 5i", "6+5i", 0, "Compute."),
    ("plain", "DeepMath", "\\frac{1}{2^{99}}", "\\frac{1}{2^{98}}", 0, "Evaluate the limit."),
    ("plain", "DeepMath", "\\frac{1}{2^{99}}", "2^{-99}", 1, "Evaluate the limit."),
    ("plain", "DeepMath", "e^{-1}", "\\frac{1}{e}", 1, "Evaluate the limit."),
    ("plain", "DeepMath", "e^{-1}", "e", 0, "Evaluate the limit."),
    ("plain", "DeepMath", "0", "0", 1, "Evaluate the integral."),
    ("plain", "Polaris", "-\\frac{\\pi}{6}", "-\\pi/6", 1, "Find the angle."),
    ("plain", "Polaris", "-\\frac{\\pi}{6}", "\\pi/6", 0, "Find the angle."),
    ("plain", "OlympiadBench", "2^{2023}-1", "2^{2023} - 1", 1, "Find the number."),
    ("plain", "OlympiadBench", "2^{2023}-1", "2^{2022}-1", 0, "Find the number."),
    ("plain", "OlympiadBench", "\\frac{\\sqrt{3}}{2}", "\\frac{\\sqrt3}{2}", 1, "Find the ratio."),
    ("plain", "OlympiadBench", "\\frac{\\sqrt{3}}{2}", "\\frac{\\sqrt2}{2}", 0, "Find the ratio."),
    ("plain", "MATH", "x^2+2x+1", "(x+1)^2", 1, "Expand."),
    ("plain", "MATH", "x^2+2x+1", "(x-1)^2", 0, "Expand."),
    ("plain", "MATH", VEC, "\\begin{pmatrix}1\\\\-2\\end{pmatrix}", 1, "Find v."),
    ("plain", "MATH", VEC, "\\begin{pmatrix}1\\\\2\\end{pmatrix}", 0, "Find v."),
]

# The last classes of false negatives found on real outputs, appended after every other item so the
# earlier ids stay as they were.
LAST_CLASSES = [
    ("unicode", "MATH", "(-\\infty,-3)\\cup(3,\\infty)", "(−∞, −3) ∪ (3, +∞)", 1, "Solve x^2 > 9."),
    ("unicode", "MATH", "(-\\infty,-3)\\cup(3,\\infty)", "(−∞, −3) ∪ (4, +∞)", 0, "Solve x^2 > 9."),
    ("unicode", "Polaris", "x \\le 5", "x ≤ 5", 1, "Solve 2x + 1 <= 11."),
    ("unicode", "Polaris", "x \\le 5", "x < 5", 0, "Solve 2x + 1 <= 11."),
    ("unicode", "MATH", "2\\sqrt{3}", "2√3", 1, "Simplify sqrt(12)."),
    ("unicode", "MATH", "2\\sqrt{3}", "3√2", 0, "Simplify sqrt(12)."),
    ("unicode", "DeepMath", "x^2+1", "x² + 1", 1, "Find f(x)."),
    ("unicode", "DeepMath", "x^2+1", "x³ + 1", 0, "Find f(x)."),
    ("unicode", "OlympiadBench", "-\\frac{\\pi}{4}", "−π/4", 1, "Find the angle."),
    ("unicode", "OlympiadBench", "-\\frac{\\pi}{4}", "π/4", 0, "Find the angle."),
    ("set_builder", "MATH", "(-1,1)", "\\{x \\mid -1 < x < 1\\}", 1, "Solve |x| < 1."),
    ("set_builder", "MATH", "(-1,1)", "\\{x \\mid -1 \\le x < 1\\}", 0, "Solve |x| < 1."),
    ("set_builder", "Polaris", "[0,\\infty)", "\\{x : x \\ge 0\\}", 1, "Find the domain of sqrt(x)."),
    ("set_builder", "Polaris", "[0,\\infty)", "\\{x : x > 0\\}", 0, "Find the domain of sqrt(x)."),
    ("plus_minus", "MATH", "\\{2,-2\\}", "\\{\\pm 2\\}", 1, "Find all x with x^2 = 4."),
    ("plus_minus", "MATH", "\\{2,-2\\}", "\\{\\pm 3\\}", 0, "Find all x with x^2 = 4."),
    ("plus_minus", "OlympiadBench", "1+\\sqrt{2}, 1-\\sqrt{2}", "1 \\pm \\sqrt{2}", 1, "Solve x^2 - 2x - 1 = 0."),
    ("plus_minus", "OlympiadBench", "1+\\sqrt{2}, 1-\\sqrt{2}", "1 + \\sqrt{2}", 0, "Solve x^2 - 2x - 1 = 0."),
    ("column_vector", "MATH", "(1,2)", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", 1, "Find the vector v."),
    ("column_vector", "MATH", "(1,2)", "\\begin{pmatrix} 2 \\\\ 1 \\end{pmatrix}", 0, "Find the vector v."),
    ("column_vector", "MATH", COL3, "(3, -1, 2)", 1, "Project v."),
    ("column_vector", "MATH", COL3, "(3, 1, 2)", 0, "Project v."),
    ("ordinal_unit", "MATH", "12", "12^{\\mathrm{th}}", 1, "Which term of the sequence is 45?"),
    ("ordinal_unit", "MATH", "12", "13^{\\mathrm{th}}", 0, "Which term of the sequence is 45?"),
    ("ordinal_unit", "GSM8K", "15", "15th day", 1, "On which day does the tank fill?"),
    ("ordinal_unit", "GSM8K", "15", "16th day", 0, "On which day does the tank fill?"),
    ("ordinal_unit", "GSM8K", "5", "5\\text{ cm}", 1, "How long is the side?"),
    ("ordinal_unit", "GSM8K", "5", "6\\text{ cm}", 0, "How long is the side?"),
    ("labelled", "OlympiadBench", "1, 3", "Minimum: 1, Maximum: 3", 1, "Find the minimum and the maximum."),
    ("labelled", "OlympiadBench", "1, 3", "Minimum: 1, Maximum: 4", 0, "Find the minimum and the maximum."),
    ("labelled", "Polaris", "1,3", "\\text{Minimum: } 1, \\text{Maximum: } 3", 1, "Find the minimum and the maximum."),
    ("labelled", "Polaris", "1,3", "\\text{Minimum: } 3", 0, "Find the minimum and the maximum."),
    ("frac_braces", "MATH", "\\frac{1+a}{c}", "\\frac{1+a}c", 1, "Express x in terms of a and c."),
    ("frac_braces", "MATH", "\\frac{1+a}{c}", "\\frac{1-a}c", 0, "Express x in terms of a and c."),
    ("frac_braces", "MATH", "\\frac{x}{2}", "\\dfrac x2", 1, "Find the inverse function."),
    ("frac_braces", "MATH", "\\frac{x}{2}", "\\dfrac x3", 0, "Find the inverse function."),
    ("degree_sign", "MATH", "30^\\circ", "30°", 1, "Find the angle in degrees."),
    ("degree_sign", "MATH", "30^\\circ", "60°", 0, "Find the angle in degrees."),
    ("degree_sign", "MATH", "30^\\circ", "30\\degree", 1, "Find the angle in degrees."),
    ("degree_sign", "MATH", "30", "31^{\\circ}", 0, "Find the angle in degrees."),
    ("infinity", "DeepMath", "\\infty", "\\text{infinitely many}", 1, "How many solutions are there?"),
    ("infinity", "DeepMath", "\\infty", "\\text{finitely many}", 0, "How many solutions are there?"),
    ("infinity", "OlympiadBench", "\\text{infinitely many}", "\\infty", 1, "How many such n exist?"),
    ("infinity", "OlympiadBench", "\\text{infinitely many}", "1", 0, "How many such n exist?"),
    ("ordering", "MATH", "a, b, c", "a < b < c", 1, "Order a, b, c from least to greatest."),
    ("ordering", "MATH", "a, b, c", "b < a < c", 0, "Order a, b, c from least to greatest."),
    ("ordering", "Polaris", "\\sqrt{2}, \\frac{3}{2}, 2", "\\sqrt2 < \\frac32 < 2", 1, "Order from least to greatest."),
    ("ordering", "Polaris", "\\sqrt{2}, \\frac{3}{2}, 2", "\\frac32 < \\sqrt2 < 2", 0, "Order from least to greatest."),
    ("trig_degrees", "OlympiadBench", "\\frac{\\sqrt{3}}{8}", "\\sin 20^\\circ \\sin 40^\\circ \\sin 80^\\circ", 1,
     "Compute the product in closed form."),
    ("trig_degrees", "OlympiadBench", "\\frac{\\sqrt{3}}{8}", "\\sin 20^\\circ \\sin 40^\\circ \\sin 70^\\circ", 0,
     "Compute the product in closed form."),
    ("trig_degrees", "MATH", "\\frac{1}{16}", "\\cos 20^\\circ \\cos 40^\\circ \\cos 60^\\circ \\cos 80^\\circ", 1,
     "Compute the product."),
    ("trig_degrees", "MATH", "\\frac{1}{8}", "\\cos 20^\\circ \\cos 40^\\circ \\cos 60^\\circ \\cos 80^\\circ", 0,
     "Compute the product."),
]

# Full solutions written as models write them: (class, shape, reference, completion, label).
FULL = [
    ("extract_prose_trap", "MATH", "23", "The GCF of 36 and 48 is 12. To find the final answer, I need to increase "
     "the GCF by 11.\n12 + 11 = 23\n\n# Answer\n\n23", 1),
    ("extract_prose_trap", "MATH", "23", "The GCF is 12. To find the final answer, I need to increase the GCF by "
     "11, which gives 22.\n\n# Answer\n\n22", 0),
    ("extract_minus_outside", "MATH", "-\\frac{\\pi}{6}", "So $\\theta$ equals -$\\pi/6$.", 1),
    ("extract_minus_outside", "MATH", "\\frac{\\pi}{6}", "So $\\theta$ equals -$\\pi/6$.", 0),
    ("extract_minus_outside", "Polaris", "-3", "The answer is -$3$.", 1),
    ("extract_minus_outside", "Polaris", "3", "The answer is -$3$.", 0),
    ("extract_percent_outside", "GSM8K", "50\\%", "So the discount is $50$%.", 1),
    ("extract_percent_outside", "GSM8K", "50\\%", "The answer is $5$%.", 0),
    ("extract_fbox", "MATH", "7", "Adding gives \\fbox{7}.", 1),
    ("extract_fbox", "MATH", "7", "Adding gives \\fbox{8}.", 0),
    ("extract_think", "Polaris", "9", "<think>maybe \\boxed{8}</think>Checking again, the answer is $9$.", 1),
    ("extract_think", "Polaris", "8", "<think>maybe \\boxed{8}</think>Checking again, the answer is $9$.", 0),
    ("extract_unclosed_think", "Polaris", "8", "<think>so it is \\boxed{8}", 0),
]

FORMS = {  # how a model states its final answer X after a worked solution (no box)
    "extract_answer_heading": lambda x: f"\n\n# Answer\n\n{x}",
    "extract_the_answer_is": lambda x: f"\n\nThe answer is ${x}$.",
    "extract_final_answer": lambda x: f"\n\nFinal Answer: The final answer is ${x}$. I hope it is correct.",
    "extract_last_line": lambda x: f"\n\n$${x}$$",
    "extract_boxed": lambda x: f"\n\nTherefore the answer is $\\boxed{{{x}}}$.",
}


def _strip_box(solution: str) -> str:
    """The reference solution with its box unwrapped (`\\boxed{x}` -> `x`) so the form under test is the
    only place the final answer is marked."""
    out, pos = [], 0
    while (start := solution.find("\\boxed{", pos)) >= 0:
        depth, i = 0, start + 6
        for i in range(start + 6, len(solution)):
            depth += (solution[i] == "{") - (solution[i] == "}")
            if depth == 0:
                break
        out.append(solution[pos:start] + solution[start + 7:i])
        pos = i + 1
    return "".join(out) + solution[pos:]


def _math500(rng: random.Random) -> list[dict]:
    rows = [json.loads(line) for line in (REFERENCE / "math500" / "test.jsonl").open()]
    rows = [r for r in rows if len(r["solution"]) < 1500 and "\\boxed{" in r["solution"]
            and "answer" not in r["solution"].lower()]  # the restated form is then the one final answer
    picked = rng.sample(rows, 60)
    items = []
    for k, row in enumerate(picked):
        form = list(FORMS)[k % len(FORMS)]
        body = _strip_box(row["solution"]).rstrip()
        other = picked[(k + 7) % len(picked)]["answer"]
        items.append(_item(form, "MATH", row["answer"], body + FORMS[form](row["answer"]), 1, row["problem"]))
        if _norm(other) != _norm(row["answer"]):
            items.append(_item(form, "MATH", row["answer"], body + FORMS[form](other), 0, row["problem"]))
    return items


def _gsm8k(rng: random.Random) -> list[dict]:
    rows = [json.loads(line) for line in (REFERENCE / "gsm8k" / "test.jsonl").open()]
    items = []
    for k, row in enumerate(rng.sample(rows, 30)):
        body, _, final = row["answer"].rpartition("####")
        final = final.strip()
        worked = re.sub(r"<<[^>]*>>", "", body).rstrip()
        wrong = str(int(final.replace(",", "")) + 1) if final.replace(",", "").isdigit() else final + "1"
        text = worked + (f"\n#### {final}" if k % 2 == 0 else f"\nThe answer is {final}.")
        bad = worked + (f"\n#### {wrong}" if k % 2 == 0 else f"\nThe answer is {wrong}.")
        cls = "extract_gsm8k_hashes" if k % 2 == 0 else "extract_the_answer_is"
        items += [_item(cls, "GSM8K", final, text, 1, row["question"]),
                  _item(cls, "GSM8K", final, bad, 0, row["question"])]
    return items


def _norm(text: str) -> str:
    return re.sub(r"\s|\\left|\\right|\\!|\\,", "", text)


def _item(cls: str, shape: str, answer: str, output: str, label: int, problem: str, form: str = "full") -> dict:
    return {"class": cls, "shape": shape, "form": form, "problem": problem, "answer": answer,
            "output": output, "label": "correct" if label else "wrong"}


def _hand(rows: list[tuple]) -> list[dict]:
    """Each hand-written row as a bare answer and inside a one-line worked solution."""
    items = []
    for cls, shape, answer, final, label, problem in rows:
        items.append(_item(cls, shape, answer, final, label, problem, form="bare"))
        worked = f"Working through the problem step by step, we reach the result.\n\nThe answer is ${final}$."
        items.append(_item(cls, shape, answer, worked, label, problem))
    return items


def build() -> list[dict]:
    rng = random.Random(31)
    items = _hand(HAND)
    items += [_item(c, s, a, o, lab, "") for c, s, a, o, lab in FULL]
    items += _math500(rng) + _gsm8k(rng) + _hand(LAST_CLASSES)
    for k, item in enumerate(items):
        item["id"] = f"acc-{k:04d}"
    return items


def main() -> None:
    items = build()
    with (HERE / "items.jsonl").open("w", encoding="utf-8") as f:
        for item in items:
            f.write(json.dumps(item, ensure_ascii=False) + "\n")
    print(f"{len(items)} items -> {HERE / 'items.jsonl'}")


if __name__ == "__main__":
    main()
