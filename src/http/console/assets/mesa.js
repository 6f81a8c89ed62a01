// The live desk, on every page of a signed-in agent. The pages work without it (a reload shows the
// same); with it:
// - the desk's events (/console/eventos, server-sent) make the page read its live parts again
//   ([data-vivo] by id) and the menu's counts; an offer to me sounds, raises a browser notification
//   (permission asked once, from a button) and a banner;
// - clocks ("vence em 6 min") tick;
// - the keyboard: j/k next/previous case, a claim, t transfer, n note, r reply, / canned answer,
//   Ctrl+Enter sends, ? the sheet, g f the queue;
// - canned answers: "/" and a shortcut in the reply box lists them, Enter or Tab inserts one.
(function () {
  "use strict";
  var body = document.body;
  if (!body || !body.hasAttribute("data-eu")) { return; }
  var caseBox = document.getElementById("caso");
  var thisCase = caseBox ? caseBox.getAttribute("data-caso") : null;

  // ---- reading the live parts again ----
  var pending = null;
  // The menu's counts.
  function counts() {
    fetch("/console/contagem", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (n) {
        var badge = document.getElementById("contagem-fila");
        if (!n || !badge) { return; }
        badge.textContent = n.aguardando + " · " + n.meus;
        badge.setAttribute("aria-label", n.aguardando + " aguardando, " + n.meus + " seus");
      })
      .catch(function () {});
  }
  function refresh() {
    counts();
    if (!document.querySelector("[data-vivo]")) { return; }
    fetch(location.href, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) { return; }
        var fresh = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-vivo][id]").forEach(function (old) {
          var now = fresh.getElementById(old.id);
          if (now && now.innerHTML !== old.innerHTML) {
            old.innerHTML = now.innerHTML;
            if (old.id === "mensagens") { old.scrollTop = old.scrollHeight; }
          }
        });
        tick();
        mark(chosen, false);
      })
      .catch(function () {});
  }
  function soon() {
    if (pending) { clearTimeout(pending); }
    pending = setTimeout(function () { pending = null; refresh(); }, 150);
  }

  // ---- an offer to me ----
  var audio = null;
  function wakeAudio() {
    if (audio || !(window.AudioContext || window.webkitAudioContext)) { return; }
    try { audio = new (window.AudioContext || window.webkitAudioContext)(); } catch (e) { audio = null; }
  }
  document.addEventListener("click", wakeAudio, { once: true });
  document.addEventListener("keydown", wakeAudio, { once: true });
  function beep() {
    if (!audio) { return; }
    [0, 0.25].forEach(function (at) {
      var o = audio.createOscillator(), g = audio.createGain();
      o.frequency.value = 880;
      g.gain.value = 0.15;
      o.connect(g); g.connect(audio.destination);
      o.start(audio.currentTime + at); o.stop(audio.currentTime + at + 0.15);
    });
  }
  function announce(offer, listening) {
    var link = "/console/cases/" + encodeURIComponent(offer.caso);
    var banner = document.getElementById("avisos-vivos");
    if (banner) {
      banner.textContent = "";
      var a = document.createElement("a");
      a.href = link;
      a.id = "aviso-oferta";
      a.textContent = "Novo atendimento para você: " + offer.protocolo + " (equipe " + offer.equipe + ")";
      banner.appendChild(a);
    }
    body.setAttribute("data-ofertas", String(Number(body.getAttribute("data-ofertas") || 0) + 1));
    if (!listening) { return; }
    beep();
    if ("Notification" in window && Notification.permission === "granted") {
      try {
        var n = new Notification("Novo atendimento: " + offer.protocolo, {
          body: "Oferecido a você na equipe " + offer.equipe + ".",
          tag: "vt-oferta-" + offer.caso
        });
        n.onclick = function () { window.focus(); location.href = link; };
      } catch (e) { /* a browser that refuses it still shows the banner */ }
    }
  }
  var ask = document.getElementById("ativar-avisos");
  if (ask && "Notification" in window && Notification.permission === "default" &&
      !localStorage.getItem("vt-avisos-pedidos")) {
    ask.hidden = false;
    ask.addEventListener("click", function () {
      localStorage.setItem("vt-avisos-pedidos", "1");
      ask.hidden = true;
      Notification.requestPermission();
    });
  }

  // ---- the events ----
  // One stream per browser, not per tab: the tab holding the lock "vt-mesa" listens and passes every
  // event to the other tabs (a browser has six connections to a host; six tabs holding one each
  // would leave none for pages). A tab leaving (or kept in the back-forward cache) lets the lock go
  // and another tab takes over. Without Web Locks (a page not on HTTPS nor localhost) each tab
  // listens for itself. Only the listening tab raises the notification; every tab shows the banner.
  var open = false, events = null, release = null;
  var channel = window.BroadcastChannel ? new BroadcastChannel("vt-mesa") : null;
  function live(on) { open = on; body.setAttribute("data-ao-vivo", on ? "sim" : "nao"); }
  function handle(kind, data, listening) {
    if (kind === "vivo") { live(true); return; }
    var said = {};
    try { said = JSON.parse(data); } catch (x) { said = {}; }
    if (kind === "oferta") { announce(said, listening); soon(); return; }
    // A case page reads itself again for its own case only; lists for any.
    if (thisCase && said.caso && said.caso !== thisCase) { counts(); return; }
    soon();
  }
  function tell(kind, data) {
    handle(kind, data, true);
    if (channel) { channel.postMessage({ kind: kind, data: data }); }
  }
  function connect() {
    if (!window.EventSource || events) { return; }
    events = new EventSource("/console/eventos");
    events.onopen = function () { tell("vivo", ""); };
    events.onerror = function () { live(false); };
    events.addEventListener("caso", function (e) { tell("caso", e.data); });
    events.addEventListener("oferta", function (e) { tell("oferta", e.data); });
  }
  function disconnect() {
    if (events) { events.close(); events = null; }
    if (release) { release(); release = null; }
    live(false);
  }
  function lead() {
    if (!(navigator.locks && channel)) { connect(); return; }
    navigator.locks.request("vt-mesa", function () {
      connect();
      return new Promise(function (resolve) { release = resolve; });
    });
  }
  if (channel) {
    channel.onmessage = function (m) {
      if (!events && m.data && m.data.kind !== "quem") { handle(m.data.kind, m.data.data, false); }
    };
    // A tab that follows asks whether someone listens; the listener answers.
    channel.postMessage({ kind: "quem" });
    channel.addEventListener("message", function (m) {
      if (events && m.data && m.data.kind === "quem" && open) { channel.postMessage({ kind: "vivo" }); }
    });
  }
  lead();
  window.addEventListener("pagehide", disconnect);
  window.addEventListener("pageshow", function (e) { if (e.persisted) { lead(); refresh(); } });
  // Without the events (a proxy that cuts them), the page still reads itself now and then.
  setInterval(function () { if (!open) { refresh(); } }, 20000);

  // ---- clocks ----
  function left(due) {
    var minutes = (due - Date.now()) / 60000;
    if (minutes >= 0) {
      var m = Math.ceil(minutes);
      return m >= 120 ? "vence em " + Math.floor(m / 60) + " h" : "vence em " + m + " min";
    }
    return "venceu há " + Math.ceil(-minutes) + " min";
  }
  function tick() {
    document.querySelectorAll("[data-vence]").forEach(function (el) {
      var due = Date.parse(el.getAttribute("data-vence"));
      if (!isNaN(due)) {
        el.textContent = left(due);
        el.classList.toggle("vencido", due < Date.now());
      }
    });
  }
  tick();
  setInterval(tick, 15000);

  // ---- keyboard ----
  var chosen = -1;
  function rows() { return Array.prototype.slice.call(document.querySelectorAll("tr.caso")); }
  // The selected row; `focus`: the keyboard moved it (a refresh only marks it again, never taking the
  // focus from where the agent is typing).
  function mark(i, focus) {
    var all = rows();
    all.forEach(function (r) { r.classList.remove("escolhido"); });
    if (i < 0 || i >= all.length) { return; }
    all[i].classList.add("escolhido");
    var link = all[i].querySelector("a.protocolo");
    if (focus && link && document.activeElement !== link) { link.focus(); }
  }
  function move(step) {
    if (thisCase) {
      var to = caseBox.getAttribute(step > 0 ? "data-proximo" : "data-anterior");
      if (to) { location.href = to; }
      return;
    }
    var all = rows();
    if (!all.length) { return; }
    chosen = Math.max(0, Math.min(all.length - 1, chosen + step));
    mark(chosen, true);
  }
  function press(id) {
    var el = document.getElementById(id);
    if (el) { el.click(); return true; }
    return false;
  }
  function reach(id) {
    var el = document.getElementById(id);
    if (!el) { return false; }
    var box = el.closest("details");
    if (box) { box.open = true; }
    el.scrollIntoView({ block: "center" });
    el.focus();
    return true;
  }
  var sheet = document.getElementById("atalhos");
  var opener = document.getElementById("abrir-atalhos");
  if (opener && sheet) { opener.addEventListener("click", function () { sheet.showModal(); }); }
  var gPressed = 0;
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    var typing = t && (t.tagName === "TEXTAREA" || t.tagName === "INPUT" || t.tagName === "SELECT" || t.isContentEditable);
    if ((e.ctrlKey || e.metaKey) && e.key === "Enter" && typing && t.form) {
      e.preventDefault();
      if (t.form.requestSubmit) { t.form.requestSubmit(); } else { t.form.submit(); }
      return;
    }
    if (typing || e.ctrlKey || e.metaKey || e.altKey) { return; }
    if (sheet && sheet.open) { return; }
    var now = Date.now();
    var handled = true;
    switch (e.key) {
      case "?": if (sheet) { sheet.showModal(); } break;
      case "j": move(1); break;
      case "k": move(-1); break;
      case "a":
        if (!press("assumir")) {
          var row = rows()[chosen];
          var claim = row && row.querySelector("button.assumir");
          if (claim) { claim.click(); } else { handled = false; }
        }
        break;
      case "t": handled = reach("equipe"); break;
      case "n": handled = reach("nota-interna"); break;
      case "r": handled = reach("texto"); break;
      case "/":
        handled = reach("texto");
        if (handled) {
          var box = document.getElementById("texto");
          if (!box.value) { box.value = "/"; }
          box.dispatchEvent(new Event("input"));
        }
        break;
      case "g": gPressed = now; break;
      case "f": if (now - gPressed < 1500) { location.href = "/console/fila"; } else { handled = false; } break;
      default: handled = false;
    }
    if (handled) { e.preventDefault(); }
  });

  // ---- the transfer form shows the chosen team's members ----
  var team = document.getElementById("equipe");
  var person = document.getElementById("agente");
  function members() {
    if (!team || !person) { return; }
    person.querySelectorAll("optgroup").forEach(function (g) {
      var theirs = g.getAttribute("data-equipe") === team.value;
      g.hidden = !theirs;
    });
    var picked = person.options[person.selectedIndex];
    if (picked && picked.parentNode.hidden) { person.value = ""; }
  }
  if (team && person) { team.addEventListener("change", members); members(); }

  // ---- canned answers ----
  var reply = document.getElementById("texto");
  var list = document.getElementById("prontas-lista");
  var source = document.getElementById("respostas-prontas");
  var chosenAnswer = document.getElementById("pronta");
  if (!reply || !list || !source) { return; }
  var answers = [];
  try { answers = JSON.parse(source.textContent) || []; } catch (x) { answers = []; }
  var shown = [], at = 0;
  function token() {
    var before = reply.value.slice(0, reply.selectionStart);
    var m = /(^|\s)\/([a-z0-9_-]*)$/.exec(before);
    return m ? { word: m[2], start: before.length - m[2].length - 1 } : null;
  }
  function hide() { list.hidden = true; shown = []; reply.setAttribute("aria-expanded", "false"); }
  function draw() {
    list.textContent = "";
    shown.forEach(function (a, i) {
      var li = document.createElement("li");
      li.setAttribute("role", "option");
      li.id = "pronta-" + a.atalho;
      li.setAttribute("aria-selected", i === at ? "true" : "false");
      var code = document.createElement("code");
      code.textContent = "/" + a.atalho;
      li.appendChild(code);
      li.appendChild(document.createTextNode(a.texto.length > 90 ? a.texto.slice(0, 90) + "…" : a.texto));
      li.addEventListener("mousedown", function (ev) { ev.preventDefault(); insert(a); });
      list.appendChild(li);
    });
    list.hidden = shown.length === 0;
    reply.setAttribute("aria-expanded", shown.length ? "true" : "false");
    if (shown.length) { reply.setAttribute("aria-activedescendant", "pronta-" + shown[at].atalho); }
  }
  function insert(a) {
    var t = token();
    if (!t) { hide(); return; }
    var end = reply.selectionStart;
    reply.value = reply.value.slice(0, t.start) + a.texto + reply.value.slice(end);
    var caret = t.start + a.texto.length;
    reply.setSelectionRange(caret, caret);
    if (chosenAnswer) { chosenAnswer.value = a.atalho; }
    hide();
    reply.focus();
  }
  reply.addEventListener("input", function () {
    if (!reply.value.trim() && chosenAnswer) { chosenAnswer.value = ""; }
    var t = token();
    if (!t) { hide(); return; }
    shown = answers.filter(function (a) { return a.atalho.indexOf(t.word) === 0; });
    at = 0;
    draw();
  });
  reply.addEventListener("keydown", function (e) {
    if (list.hidden || !shown.length || e.ctrlKey || e.metaKey) { return; }
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      at = (at + (e.key === "ArrowDown" ? 1 : shown.length - 1)) % shown.length;
      draw();
      e.preventDefault();
    } else if (e.key === "Enter" || e.key === "Tab") {
      insert(shown[at]);
      e.preventDefault();
    } else if (e.key === "Escape") {
      hide();
      e.preventDefault();
    }
  });
  reply.addEventListener("blur", function () { setTimeout(hide, 150); });
})();
