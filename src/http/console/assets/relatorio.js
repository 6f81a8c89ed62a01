// The report's charts, drawn by Chart.js from the numbers the page carries as JSON (#dados-relatorio).
// The same numbers are in the tables, for reading without JavaScript.
(function () {
  "use strict";
  var fonte = document.getElementById("dados-relatorio");
  if (!fonte || typeof Chart === "undefined") { return; }
  var dados = JSON.parse(fonte.textContent);
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;
  // Axes and tooltips in pt-BR numbers (12,5; 1.200), as the tables beside them.
  Chart.defaults.locale = "pt-BR";
  function desenhar(id, config) {
    var canvas = document.getElementById(id);
    if (!canvas) { return; }
    new Chart(canvas, config);
    canvas.dataset.desenhado = "sim";
  }
  desenhar("grafico-sla", {
    type: "bar",
    data: { labels: dados.rotulos, datasets: [{ label: "% cumpridos", backgroundColor: "#2e8b57", data: dados.sla }] },
    options: { scales: { y: { beginAtZero: true, max: 100 } } }
  });
  desenhar("grafico-mediana", {
    type: "bar",
    data: { labels: dados.rotulos, datasets: [{ label: "minutos úteis", backgroundColor: "#1f5fa8", data: dados.mediana }] },
    options: { scales: { y: { beginAtZero: true } } }
  });
})();
