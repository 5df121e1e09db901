"""What a reader sees of a plotly chart in a real browser, measured on its drawn boxes (issue 40, item 4): every
tick label inside the figure, no axis title on a tick label of its axis, the legend inside the figure and clear of
the x tick labels and titles, and no series drawn in a grey near black or near white (what a chart drawn with a
template it does not know shows: placeholder colours ``#000001``..., or black lines that vanish on a dark page).

:func:`chart_problems` evaluates :data:`MEASURE` in a Playwright page and returns, per chart, what is wrong.
"""

from __future__ import annotations

# Boxes meet when they overlap by more than half a pixel (adjacent boxes share an edge); a grey is "uncoloured"
# when its channels differ by under 20 and it is darker than 64 or lighter than 200 in every channel.
MEASURE = """(charts) => {
  const box = (el) => el.getBoundingClientRect();
  const meet = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5
                         && b.top < a.bottom - 0.5;
  const inside = (a, b) => a.left >= b.left - 0.5 && a.right <= b.right + 0.5 && a.top >= b.top - 0.5
                           && a.bottom <= b.bottom + 0.5;
  const uncoloured = (colour) => {
    const m = colour.match(/rgba?\\((\\d+), (\\d+), (\\d+)/);
    if (!m) return false;
    const [r, g, b] = m.slice(1, 4).map(Number);
    return Math.max(r, g, b) - Math.min(r, g, b) < 20 && (Math.max(r, g, b) < 64 || Math.min(r, g, b) > 200);
  };
  const shown = (el) => box(el).width > 0 && el.textContent.trim() !== "";
  return [...document.querySelectorAll(charts)].map((chart) => {
    const figure = box(chart.querySelector(".main-svg"));
    const problems = [];
    const ticks = (letter) => [...chart.querySelectorAll(`.${letter}axislayer-above text`)].filter(shown);
    const titles = (letter) => [...chart.querySelectorAll(`[class^='g-${letter}'][class$='title'] text`)]
      .filter(shown);
    const [xTicks, yTicks] = [ticks("x"), ticks("y")];
    for (const t of [...xTicks, ...yTicks])
      if (!inside(box(t), figure)) problems.push(`tick label ${t.textContent} outside the figure`);
    for (const [letter, labels] of [["x", xTicks], ["y", yTicks]])
      for (const title of titles(letter)) for (const t of labels)
        if (meet(box(title), box(t))) problems.push(`${letter} title ${title.textContent} on tick ${t.textContent}`);
    const legend = chart.querySelector(".legend .bg");
    if (legend) {
      const bounds = box(legend);
      if (!inside(bounds, figure)) problems.push("legend outside the figure");
      for (const el of [...xTicks, ...titles("x")])
        if (meet(bounds, box(el))) problems.push(`legend over ${el.textContent}`);
    }
    for (const el of chart.querySelectorAll(".scatterlayer .js-line, .scatterlayer .point, .barlayer .point path")) {
      const style = getComputedStyle(el);
      const colour = el.classList.contains("js-line") ? style.stroke : style.fill;
      if (uncoloured(colour)) problems.push(`a series drawn in ${colour}`);
    }
    const title = chart.querySelector(".g-gtitle")?.textContent ?? "";
    return [title, [...new Set(problems)]];
  });
}"""


def chart_problems(pg, charts: str = ".js-plotly-plot") -> dict[str, list[str]]:
    """Per chart of page ``pg`` (CSS selector ``charts``) with a problem, its title -> what is wrong."""
    return {f"{i}: {title}": problems for i, (title, problems) in enumerate(pg.evaluate(MEASURE, charts))
            if problems}
