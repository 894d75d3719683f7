// The console's charts: each <figure data-chart="..."> is drawn with uPlot from its
// data-series attribute (JSON) or from the JSON read named by data-src. When drawn, the
// figure's data-points attribute holds how many points its x axis has. The pages work
// without this script: every chart has its figures in a caption or a table.
"use strict";

(function () {
  var COLORS = {
    mu: "#1f5fbf",
    conservative: "#b3261e",
    band: "rgba(31, 95, 191, 0.15)",
    reference: "#767676",
    error: "#b3261e",
    logLoss: "#1f5fbf",
  };
  var HEIGHT = 300;
  // Tick steps of an axis that counts (changes, runs): whole numbers only.
  var WHOLE = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000];

  function axis(label, extra) {
    var out = { label: label, stroke: "#333", grid: { stroke: "#e4e4e4" } };
    for (var name in extra) out[name] = extra[name];
    return out;
  }

  function percentTicks(self, ticks) {
    return ticks.map(function (v) { return Math.round(v * 100) + " %"; });
  }

  var KINDS = {
    trajectory: function (d) {
      // The x axis counts the changes (a match reported late keeps its place), labelled
      // with the day each was played; off the chart the legend is blank, not "--".
      var played = d.played || [];
      var at = function (i) { return played[Math.round(i)] || ""; };
      var shown = function (u, v, s, idx) { return idx == null || v == null ? "" : v.toFixed(2); };
      var mean = d.glicko ? "rating" : "mean";
      var spread = d.glicko ? "RD" : "σ";
      var series = [{ label: "Played", value: function (u, v, s, idx) { return idx == null ? "" : at(idx); } }];
      var data = [d.x];
      var bands;
      if (d.upper && d.lower) {
        series.push({ label: mean + " + " + spread, stroke: COLORS.band, width: 1, value: shown });
        series.push({ label: mean + " − " + spread, stroke: COLORS.band, width: 1, value: shown });
        data.push(d.upper, d.lower);
        bands = [{ series: [1, 2], fill: COLORS.band }];
      }
      series.push({ label: d.glicko ? "Rating" : "Mean", stroke: COLORS.mu, width: 2, value: shown });
      data.push(d.mu);
      if (d.conservative_k !== null) {
        series.push({ label: "Conservative", stroke: COLORS.conservative, width: 1.5, value: shown });
        data.push(d.conservative);
      }
      return {
        opts: {
          series: series,
          bands: bands,
          scales: { x: { time: false } },
          axes: [
            axis("played", {
              incrs: WHOLE,
              values: function (u, ticks) { return ticks.map(function (i) { return at(i).slice(0, 10); }); },
            }),
            axis("rating"),
          ],
        },
        data: data,
      };
    },
    calibration: function (d) {
      return {
        opts: {
          series: [
            { label: "Predicted" },
            { label: "Well calibrated", stroke: COLORS.reference, dash: [4, 4], points: { show: false } },
            { label: "Observed", stroke: COLORS.mu, width: 2, points: { show: true, size: 7 } },
          ],
          scales: { x: { time: false, range: [0, 1] }, y: { range: [0, 1] } },
          axes: [
            axis("predicted probability of finishing first", { values: percentTicks }),
            axis("observed", { values: percentTicks }),
          ],
        },
        data: [d.x, d.x, d.y],
      };
    },
    periods: function (d) {
      return {
        opts: {
          series: [
            { label: "Run" },
            { label: "Prediction error", stroke: COLORS.error, width: 2, scale: "error", points: { show: true } },
            { label: "Log loss", stroke: COLORS.logLoss, width: 2, scale: "loss", points: { show: true } },
          ],
          scales: { x: { time: false }, error: { range: [0, null] }, loss: { range: [0, null] } },
          axes: [
            axis("run of matches, oldest first", { incrs: WHOLE }),
            axis("prediction error", { scale: "error", values: percentTicks }),
            axis("log loss", { scale: "loss", side: 1, grid: { show: false } }),
          ],
        },
        data: [d.x, d.error, d.log_loss],
      };
    },
    draws: function (d) {
      return {
        opts: {
          series: [
            { label: "Matches" },
            { label: "No information", stroke: COLORS.reference, dash: [4, 4] },
            { label: "Draws", stroke: COLORS.mu, width: 2 },
          ],
          scales: { x: { time: false, range: [0, 1] }, y: { range: [0, 1] } },
          axes: [
            axis("share of matches, highest predicted quality first", { values: percentTicks }),
            axis("share of all draws", { values: percentTicks }),
          ],
        },
        data: [d.x, d.x, d.y],
      };
    },
  };

  function status(figure, text) {
    var out = figure.querySelector(".chart-status");
    if (out) out.textContent = text;
  }

  function draw(figure, d) {
    var kind = KINDS[figure.dataset.chart];
    var spec = kind(d);
    var target = figure.querySelector(".plot");
    spec.opts.width = Math.max(target.clientWidth, 240);
    spec.opts.height = HEIGHT;
    var plot = new uPlot(spec.opts, spec.data, target);
    var resize = function () {
      plot.setSize({ width: Math.max(target.clientWidth, 240), height: HEIGHT });
    };
    if (window.ResizeObserver) {
      new ResizeObserver(resize).observe(target);
    } else {
      window.addEventListener("resize", resize);
    }
    figure.dataset.points = String(spec.data[0].length);
    status(figure, "Chart of " + spec.data[0].length.toLocaleString("en") + " points.");
  }

  function load(figure) {
    if (figure.dataset.series) {
      draw(figure, JSON.parse(figure.dataset.series));
      return;
    }
    status(figure, "Loading the chart…");
    fetch(figure.dataset.src, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (!response.ok) throw new Error("the service answered " + response.status);
        return response.json();
      })
      .then(function (d) { draw(figure, d); })
      .catch(function (error) {
        figure.dataset.points = "0";
        status(figure, "The chart could not be drawn: " + error.message + ".");
      });
  }

  function start() {
    if (typeof uPlot === "undefined") return;
    var figures = document.querySelectorAll("figure[data-chart]");
    for (var i = 0; i < figures.length; i++) load(figures[i]);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
