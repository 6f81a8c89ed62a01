// The usage dashboard's charts, drawn by Chart.js from the numbers the page carries as JSON
// (#dados-uso). The same numbers are in tables on the page, for reading without JavaScript.
// Each canvas gets data-desenhado="sim" once its chart is drawn, with the number of points drawn.
(function () {
  "use strict";
  var fonte = document.getElementById("dados-uso");
  if (!fonte || typeof Chart === "undefined") { return; }
  var painel = JSON.parse(fonte.textContent);
  var rotulos = painel.buckets.map(function (b) { return b.label; });
  // A period without turns is null: Chart.js leaves a gap there instead of a false fall to zero.
  var cores = ["#1f5fa8", "#d9822b", "#2e8b57", "#a23b72", "#6c757d", "#c0392b", "#17a2b8"];
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;
  // Axes and tooltips in pt-BR numbers (12,5; 1.200), as the tables beside them.
  Chart.defaults.locale = "pt-BR";

  function desenhar(id, config) {
    var canvas = document.getElementById(id);
    if (!canvas) { return; }
    var grafico = new Chart(canvas, config);
    var pontos = grafico.data.datasets.reduce(function (n, d) { return n + d.data.length; }, 0);
    canvas.dataset.desenhado = "sim";
    canvas.dataset.pontos = String(pontos);
  }

  desenhar("grafico-turnos", {
    type: "bar",
    data: { labels: rotulos, datasets: [{ label: "Turnos", backgroundColor: cores[0],
      data: painel.buckets.map(function (b) { return b.turns; }) }] },
    options: { scales: { y: { beginAtZero: true, ticks: { precision: 0 } } } }
  });
  desenhar("grafico-zero", {
    type: "line",
    data: { labels: rotulos, datasets: [{ label: "% sem tokens", borderColor: cores[2], backgroundColor: cores[2],
      data: painel.buckets.map(function (b) { return b.zero_token_pct; }) }] },
    options: { scales: { y: { beginAtZero: true, max: 100 } } }
  });
  desenhar("grafico-intencao", {
    type: "bar",
    data: { labels: painel.tokens_by_intent.map(function (i) { return i[0]; }),
      datasets: [{ label: "Tokens", backgroundColor: cores[1],
        data: painel.tokens_by_intent.map(function (i) { return i[1]; }) }] },
    options: { indexAxis: "y", scales: { x: { beginAtZero: true } } }
  });
  desenhar("grafico-latencia", {
    type: "line",
    data: { labels: rotulos, datasets: [
      { label: "p50", borderColor: cores[0], backgroundColor: cores[0],
        data: painel.buckets.map(function (b) { return b.p50_ms; }) },
      { label: "p99", borderColor: cores[5], backgroundColor: cores[5],
        data: painel.buckets.map(function (b) { return b.p99_ms; }) }] },
    options: { scales: { y: { beginAtZero: true } } }
  });
  desenhar("grafico-custo", {
    type: "bar",
    data: { labels: rotulos, datasets: [{ label: "R$ (o que tem preço)", backgroundColor: cores[3],
      data: painel.buckets.map(function (b) { return b.cost_brl; }) }] },
    options: { scales: { y: { beginAtZero: true } } }
  });
  desenhar("grafico-fluxos", {
    type: "doughnut",
    data: { labels: painel.flows_by_outcome.map(function (f) { return f[0]; }),
      datasets: [{ label: "Fluxos", backgroundColor: cores,
        data: painel.flows_by_outcome.map(function (f) { return f[1]; }) }] }
  });
})();
