// The case page's messages refresh every few seconds without a reload (the page works without it:
// a reload shows the same).
(function () {
  var box = document.getElementById("mensagens");
  if (!box) { return; }
  var source = box.getAttribute("data-fonte");
  setInterval(function () {
    fetch(source, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) { if (html !== null && html !== box.innerHTML) { box.innerHTML = html; } })
      .catch(function () {});
  }, 3000);
})();
