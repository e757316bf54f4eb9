// Injected into a copy of a report and run by headless Chromium (tests/test_util.cpp,
// check_page_in_browser): measures the rendered page and its charts and writes what it found, as
// JSON, into a pre element with id layout-check, for the C++ test to read from the dumped DOM.
// Everything is measured geometry (boxes, rendered font sizes), never markup or one browser's
// formatting. The charts tag what this looks for (core/svg_chart.h): axis lines (.x-axis,
// .y-axis), tick labels (.tick), one group per series (.series) and legend entries (.legend).
(function () {
  const problems = [];
  const kMinFontPx = 10;  // the smallest text a report may render (tick labels included)
  const overlap = (a, b, slack) =>
    Math.min(a.right, b.right) - Math.max(a.left, b.left) > slack &&
    Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > slack;
  const visible = (e) => {
    const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0;
  };
  // A text's font size on screen: its CSS size times the scale its SVG is drawn at.
  const rendered_font_px = (e) => {
    const css = parseFloat(getComputedStyle(e).fontSize);
    const svg = e.ownerSVGElement;
    const ctm = svg && svg.getScreenCTM();
    return ctm ? css * Math.hypot(ctm.a, ctm.b) : css;
  };

  // The page: no horizontal scroll, at whatever width the browser was given.
  const doc = document.documentElement;
  const page = {viewport_width: doc.clientWidth, scroll_width: doc.scrollWidth, scroll_height: doc.scrollHeight};
  if (doc.scrollWidth > doc.clientWidth)
    problems.push('the page is ' + doc.scrollWidth + ' px wide in a ' + doc.clientWidth + ' px window');
  // No box of the page scrolls sideways on its own either (content hidden behind a scrollbar).
  Array.from(document.body.querySelectorAll('*')).forEach((e) => {
    const style = getComputedStyle(e);
    if (['auto', 'scroll'].includes(style.overflowX) && e.scrollWidth > e.clientWidth + 1)
      problems.push('a ' + e.tagName.toLowerCase() + ' scrolls sideways (' + e.scrollWidth + ' px in ' +
                    e.clientWidth + ' px)');
  });

  // Text the reader cannot read: any element whose own text renders below the minimum.
  Array.from(document.body.querySelectorAll('*')).forEach((e) => {
    const own = Array.from(e.childNodes).some((n) => n.nodeType === Node.TEXT_NODE && n.textContent.trim());
    if (!own || !visible(e)) return;
    const px = rendered_font_px(e);
    if (px < kMinFontPx - 0.05)
      problems.push('"' + e.textContent.trim().slice(0, 40) + '" renders at ' + px.toFixed(1) + ' px');
  });

  // Colour-coded table cells need a key to the colours beside them (in the same parent).
  Array.from(document.querySelectorAll('table')).forEach((table, i) => {
    const coloured = Array.from(table.querySelectorAll('td')).filter((td) => td.style.backgroundColor);
    if (coloured.length === 0) return;
    const legend = table.parentElement.querySelector('.color-legend');
    if (!legend || !visible(legend) || !legend.textContent.trim())
      problems.push('table ' + i + ' colours ' + coloured.length + ' cells without a colour legend');
  });

  const charts = [];
  const svgs = Array.from(document.querySelectorAll('svg'));
  svgs.forEach((svg, i) => {
    const name = svg.getAttribute('aria-label') || 'chart ' + i;
    for (const cls of ['x-label', 'y-label']) {
      const t = svg.querySelector('.' + cls);
      if (!t || !t.textContent.trim()) problems.push(name + ': no ' + cls);
    }
    const box = svg.getBoundingClientRect();
    if (box.width < 50 || box.height < 50) problems.push(name + ': rendered ' + box.width + 'x' + box.height);
    const texts = Array.from(svg.querySelectorAll('text'));
    const rects = texts.map((t) => t.getBoundingClientRect());
    rects.forEach((r, k) => {
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1)
        problems.push(name + ': "' + texts[k].textContent + '" is cut off');
    });
    for (let a = 0; a < rects.length; a++)
      for (let b = a + 1; b < rects.length; b++)
        if (overlap(rects[a], rects[b], 1))
          problems.push(name + ': "' + texts[a].textContent + '" overlaps "' + texts[b].textContent + '"');
    const legends = Array.from(svg.querySelectorAll('.legend')).map((g) => g.getBoundingClientRect());
    const marks = Array.from(svg.querySelectorAll('circle, polyline')).map((e) => e.getBoundingClientRect());
    legends.forEach((l) => marks.forEach((m) => {
      if (overlap(l, m, 0)) problems.push(name + ': a legend entry covers plotted data');
    }));
    if (svg.querySelectorAll('circle, polyline, rect').length === 0) problems.push(name + ': nothing drawn');
    charts.push(measure_chart(svg, name));
  });

  // A chart's ticks, series and markers as drawn; a marker must not sit on an axis line, and every
  // legend entry must name a series that drew something.
  function measure_chart(svg, name) {
    const ticks = {x: [], y: []};
    const x_axis = svg.querySelector('.x-axis'), y_axis = svg.querySelector('.y-axis');
    if (!x_axis || !y_axis) problems.push(name + ': its axis lines are not marked (.x-axis, .y-axis)');
    const x_line = x_axis && x_axis.getBoundingClientRect(), y_line = y_axis && y_axis.getBoundingClientRect();
    svg.querySelectorAll('.tick').forEach((t) => {
      const r = t.getBoundingClientRect();
      // A y tick sits left of the y axis, an x tick below the plot.
      const is_y = y_line ? r.right <= y_line.left + 1 : false;
      ticks[is_y ? 'y' : 'x'].push(t.textContent.trim());
    });
    const series = Array.from(svg.querySelectorAll('.series')).map((g) => {
      const points = Array.from(g.querySelectorAll('circle')).map((c) => c.getBoundingClientRect());
      points.forEach((p) => {
        const cx = (p.left + p.right) / 2, cy = (p.top + p.bottom) / 2, radius = p.width / 2;
        if (y_line && Math.abs(cx - (y_line.left + y_line.right) / 2) <= radius)
          problems.push(name + ': a point of "' + g.getAttribute('data-name') + '" sits on the y axis');
        if (x_line && Math.abs(cy - (x_line.top + x_line.bottom) / 2) <= radius)
          problems.push(name + ': a point of "' + g.getAttribute('data-name') + '" sits on the x axis');
      });
      return {name: g.getAttribute('data-name') || '', points: points.length};
    });
    const legend = Array.from(svg.querySelectorAll('.legend')).map((g) => g.textContent.trim());
    legend.forEach((entry) => {
      const s = series.find((x) => x.name === entry);
      if (!s || s.points === 0) problems.push(name + ': the legend names "' + entry + '" but nothing of it is drawn');
    });
    return {name: name, x_ticks: ticks.x, y_ticks: ticks.y, series: series, legend: legend};
  }

  const pre = document.createElement('pre');
  pre.id = 'layout-check';
  // One line per fault, however many points or cells share it.
  const distinct = Array.from(new Set(problems));
  pre.textContent = JSON.stringify({charts: svgs.length, page: page, chart_details: charts, problems: distinct});
  document.body.appendChild(pre);
})();
