// The case page opens at the conversation's newest line (its live updates are mesa.js's).
(function () {
  var box = document.getElementById("mensagens");
  if (box) { box.scrollTop = box.scrollHeight; }
})();
