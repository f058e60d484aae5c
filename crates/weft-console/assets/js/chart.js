// The throughput chart: appends/s derived from successive samples of
// /v1/status `appends_total`, drawn as an SVG line over the last minute.

const NS = "http://www.w3.org/2000/svg";
const WIDTH = 320;
const HEIGHT = 100;
const WINDOW = 60;

function svg(tag, attrs) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

export class ThroughputChart {
  constructor(svgNode, label) {
    this.node = svgNode;
    this.label = label;
    this.last = null;
    this.rates = [];
  }

  // One sample: the counter's value at a time (ms). The first sample only
  // sets the baseline; a counter that went down (a restarted server)
  // starts a new baseline rather than a negative rate.
  sample(timeMs, total) {
    if (this.last && timeMs > this.last.timeMs && total >= this.last.total) {
      const rate = ((total - this.last.total) * 1000) / (timeMs - this.last.timeMs);
      this.rates.push(rate);
      if (this.rates.length > WINDOW) this.rates.shift();
    }
    this.last = { timeMs, total };
    this.draw();
  }

  draw() {
    this.node.replaceChildren();
    const max = Math.max(1, ...this.rates);
    // A rounded ceiling keeps the scale from jumping at every sample.
    const scale = niceCeiling(max);
    for (const f of [0.25, 0.5, 0.75]) {
      const y = HEIGHT - f * HEIGHT;
      this.node.append(svg("line", { x1: 0, x2: WIDTH, y1: y, y2: y, class: "grid-line" }));
    }
    const current = this.rates.length ? this.rates[this.rates.length - 1] : 0;
    this.label.textContent = this.rates.length
      ? `now ${Math.round(current)}/s · top of scale ${scale}/s`
      : "measuring…";
    if (this.rates.length < 2) return;
    const step = WIDTH / (WINDOW - 1);
    const x0 = WIDTH - (this.rates.length - 1) * step;
    const points = this.rates.map((r, i) => `${(x0 + i * step).toFixed(1)},${(HEIGHT - (r / scale) * HEIGHT).toFixed(1)}`);
    this.node.append(svg("polygon", { points: `${x0},${HEIGHT} ${points.join(" ")} ${WIDTH},${HEIGHT}`, class: "area" }));
    this.node.append(svg("polyline", { points: points.join(" "), class: "rate" }));
  }
}

function niceCeiling(x) {
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}
