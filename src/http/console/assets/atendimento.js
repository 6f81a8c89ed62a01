// The case page's messages refresh every few seconds without a reload (the page works without it:
// a reload shows the same), and the newest line stays in view.
(function () {
  var box = document.getElementById("mensagens");
  if (!box) { return; }
  var newest = function () { box.scrollTop = box.scrollHeight; };
  newest();
  var source = box.getAttribute("data-fonte");
  if (!source) { return; }
  setInterval(function () {
    fetch(source, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) { if (html !== null && html !== box.innerHTML) { box.innerHTML = html; newest(); } })
      .catch(function () {});
  }, 3000);
})();
