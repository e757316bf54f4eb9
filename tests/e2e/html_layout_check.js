// Injected into a copy of a report and run by headless Chromium (tests/test_util.cpp,
// check_page_in_browser): measures the rendered charts and writes what it found, as JSON, into
// a pre element with id layout-check, for the C++ test to read from the dumped DOM.
(function () {
  const problems = [];
  const overlap = (a, b, slack) =>
    Math.min(a.right, b.right) - Math.max(a.left, b.left) > slack &&
    Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > slack;
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
  });
  const pre = document.createElement('pre');
  pre.id = 'layout-check';
  pre.textContent = JSON.stringify({charts: svgs.length, problems: problems});
  document.body.appendChild(pre);
})();
