/* vt-agent web chat: <script src="https://HOST/webchat/widget.js" data-tenant="acme" async></script>
 * Optional: data-user-token (the operator's signed user token), data-lang (pt, en, es).
 * No framework, no storage, no console output: the session is an HttpOnly cookie of HOST, and what
 * is shown comes from HOST's event stream, cards masked. */
(function () {
  'use strict';
  var script = document.currentScript;
  if (!script || window.__vtWebchat) { return; }
  window.__vtWebchat = true;
  var tenant = script.getAttribute('data-tenant') || '';
  var userToken = script.getAttribute('data-user-token') || '';
  var api = new URL(script.src).origin + '/webchat/api';

  var TEXTS = {
    pt: {
      open: 'Abrir o chat', close: 'Fechar o chat', chat: 'Chat', input: 'Sua mensagem',
      placeholder: 'Escreva sua mensagem', send: 'Enviar', typing: 'digitando…', you: 'Você',
      agent: 'atendente', copy: 'Copiar código', copyLine: 'Copiar linha', copied: 'Copiado',
      qr: 'QR Code do Pix', pay: 'Pagar com cartão', offline: 'Reconectando…', retry: 'Não foi possível enviar. Tente de novo.',
      slow: 'Muitas mensagens em pouco tempo; espere um instante.', options: 'Opções', unread: 'mensagens novas'
    },
    en: {
      open: 'Open the chat', close: 'Close the chat', chat: 'Chat', input: 'Your message',
      placeholder: 'Type your message', send: 'Send', typing: 'typing…', you: 'You',
      agent: 'agent', copy: 'Copy code', copyLine: 'Copy line', copied: 'Copied',
      qr: 'Pix QR code', pay: 'Pay by card', offline: 'Reconnecting…', retry: 'Could not send. Please try again.',
      slow: 'Too many messages; please wait a moment.', options: 'Options', unread: 'new messages'
    },
    es: {
      open: 'Abrir el chat', close: 'Cerrar el chat', chat: 'Chat', input: 'Tu mensaje',
      placeholder: 'Escribe tu mensaje', send: 'Enviar', typing: 'escribiendo…', you: 'Tú',
      agent: 'agente', copy: 'Copiar código', copyLine: 'Copiar línea', copied: 'Copiado',
      qr: 'Código QR de Pix', pay: 'Pagar con tarjeta', offline: 'Reconectando…', retry: 'No se pudo enviar. Inténtalo de nuevo.',
      slow: 'Demasiados mensajes; espera un momento.', options: 'Opciones', unread: 'mensajes nuevos'
    }
  };
  function pick(tag) {
    var l = String(tag || '').slice(0, 2).toLowerCase();
    return TEXTS[l] ? l : 'pt';
  }
  var lang = pick(script.getAttribute('data-lang') || document.documentElement.lang || navigator.language);
  function t(key) { return TEXTS[lang][key]; }

  var CSS = [
    ':host{all:initial}',
    '*{box-sizing:border-box;font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}',
    '.bolha{position:fixed;right:20px;bottom:20px;width:56px;height:56px;border-radius:50%;border:0;cursor:pointer;',
    'background:var(--cor);color:var(--texto);box-shadow:0 4px 14px rgba(0,0,0,.25);z-index:2147483000;transition:transform .15s}',
    '.bolha:hover{transform:scale(1.06)}.bolha svg{width:28px;height:28px;fill:currentColor}',
    '.bolha:focus-visible,button:focus-visible,a:focus-visible,textarea:focus-visible{outline:3px solid #1a73e8;outline-offset:2px}',
    '.novas{position:absolute;top:-4px;right:-4px;min-width:20px;height:20px;border-radius:10px;background:#c5221f;color:#fff;font-size:12px;line-height:20px;padding:0 5px}',
    '.painel{position:fixed;right:20px;bottom:88px;width:min(380px,calc(100vw - 24px));height:min(600px,calc(100vh - 110px));',
    'display:flex;flex-direction:column;background:#fff;color:#202124;border-radius:14px;overflow:hidden;',
    'box-shadow:0 8px 30px rgba(0,0,0,.3);z-index:2147483000;transition:opacity .15s,transform .15s}',
    '.painel[hidden]{display:none}',
    'header{display:flex;align-items:center;gap:10px;padding:12px 14px;background:var(--cor);color:var(--texto)}',
    'header img{width:28px;height:28px;border-radius:6px;object-fit:contain;background:#fff}',
    'header h2{flex:1;margin:0;font-size:16px;font-weight:600}',
    'header button{background:transparent;border:0;color:inherit;font-size:22px;cursor:pointer;width:32px;height:32px}',
    '.log{flex:1;overflow-y:auto;padding:12px;display:flex;flex-direction:column;gap:8px;background:#f6f7f9;margin:0;list-style:none}',
    '.msg{max-width:85%;padding:8px 11px;border-radius:12px;white-space:pre-wrap;word-wrap:break-word;font-size:14px;line-height:1.4}',
    '.user{align-self:flex-end;background:var(--cor);color:var(--texto);border-bottom-right-radius:4px}',
    '.assistant,.human_agent{align-self:flex-start;background:#fff;border:1px solid #e0e3e7;border-bottom-left-radius:4px}',
    '.human_agent{border-color:var(--cor)}',
    '.quem{display:block;font-size:11px;font-weight:600;opacity:.75;margin-bottom:2px}',
    '.pendente{opacity:.6}',
    '.pix img{display:block;width:180px;height:180px;margin:8px 0;image-rendering:pixelated;background:#fff}',
    '.acao{display:inline-block;margin-top:6px;padding:7px 12px;border-radius:8px;border:1px solid var(--cor);background:#fff;',
    'color:#202124;font-size:13px;cursor:pointer;text-decoration:none}',
    '.linha{display:block;font-family:ui-monospace,monospace;font-size:12px;margin-top:6px}',
    '.estado{min-height:18px;padding:0 14px;font-size:12px;color:#5f6368}',
    '.opcoes{display:flex;flex-wrap:wrap;gap:6px;padding:0 12px 6px}',
    '.opcoes button{padding:7px 12px;border-radius:16px;border:1px solid var(--cor);background:#fff;color:#202124;cursor:pointer;font-size:13px}',
    'form{display:flex;gap:8px;padding:10px;border-top:1px solid #e0e3e7;background:#fff}',
    'textarea{flex:1;resize:none;border:1px solid #c4c7cc;border-radius:10px;padding:8px 10px;font-size:14px;height:40px;max-height:120px}',
    'form button{border:0;border-radius:10px;padding:0 14px;background:var(--cor);color:var(--texto);font-size:14px;cursor:pointer}',
    '.oculto{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}',
    '@media (prefers-reduced-motion:reduce){*{transition:none!important;animation:none!important}}'
  ].join('');

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) { e.textContent = text; }
    return e;
  }

  var host = el('div', { id: 'vt-webchat', 'data-estado': 'iniciando' });
  var root = host.attachShadow({ mode: 'open' });
  var session = null;
  var seen = {};
  var lastId = 0;
  var pending = [];
  var unread = 0;
  var stream = null;
  var backoff = 1000;
  var ui = {};

  function state(s) { host.setAttribute('data-estado', s); }

  function call(path, body, retried) {
    var headers = { 'Content-Type': 'application/json' };
    if (session) { headers['X-CSRF-Token'] = session.csrf; }
    return fetch(api + path, {
      method: 'POST', credentials: 'include', headers: headers, body: JSON.stringify(body)
    }).then(function (r) {
      if (r.status === 401 && path !== '/sessao' && !retried) {
        return open().then(function () { return call(path, body, true); });
      }
      return r.json().catch(function () { return {}; }).then(function (j) { return { status: r.status, body: j }; });
    });
  }

  /* The page's first session takes the user token; later ones renew it (the token may have expired). */
  function open() {
    var ask = { tenant: tenant };
    if (session) { ask.renovar = true; } else if (userToken) { ask.token = userToken; }
    return call('/sessao', ask).then(function (r) {
      if (r.status === 401 && ask.token) {
        userToken = '';
        return open();
      }
      if (r.status !== 200) { throw new Error('refused'); }
      session = r.body;
      return session;
    });
  }

  function build() {
    var colour = /^#[0-9a-fA-F]{6}$/;
    host.style.setProperty('--cor', colour.test(session.cor) ? session.cor : '#0b6e4f');
    host.style.setProperty('--texto', colour.test(session.cor_texto) ? session.cor_texto : '#ffffff');
    if (root.adoptedStyleSheets !== undefined && window.CSSStyleSheet) {
      var sheet = new CSSStyleSheet();
      sheet.replaceSync(CSS);
      root.adoptedStyleSheets = [sheet];
    } else {
      root.appendChild(el('style', {}, CSS));
    }
    ui.bubble = el('button', { class: 'bolha', type: 'button', 'aria-expanded': 'false', 'aria-controls': 'painel' });
    ui.bubble.innerHTML = '<svg viewBox="0 0 24 24" aria-hidden="true"><path d="M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H8l-4 4V6a2 2 0 0 1 2-2z"/></svg>';
    ui.badge = el('span', { class: 'novas', hidden: '' });
    ui.bubble.appendChild(ui.badge);
    ui.panel = el('section', { class: 'painel', id: 'painel', role: 'dialog', hidden: '' });
    var header = el('header');
    if (session.logo && /^https?:\/\//.test(session.logo)) { header.appendChild(el('img', { src: session.logo, alt: '' })); }
    ui.title = el('h2', { id: 'titulo' }, session.nome || t('chat'));
    ui.panel.setAttribute('aria-labelledby', 'titulo');
    ui.close = el('button', { type: 'button', class: 'fechar' }, '×');
    header.appendChild(ui.title);
    header.appendChild(ui.close);
    ui.log = el('ol', { class: 'log', role: 'log', 'aria-live': 'polite', tabindex: '0' });
    ui.status = el('div', { class: 'estado', role: 'status', 'aria-live': 'polite' });
    ui.options = el('div', { class: 'opcoes', role: 'group' });
    ui.form = el('form', { autocomplete: 'off' });
    ui.label = el('label', { for: 'texto', class: 'oculto' });
    ui.input = el('textarea', { id: 'texto', rows: '1', maxlength: '4096' });
    ui.send = el('button', { type: 'submit', class: 'enviar' });
    ui.form.appendChild(ui.label);
    ui.form.appendChild(ui.input);
    ui.form.appendChild(ui.send);
    [header, ui.log, ui.status, ui.options, ui.form].forEach(function (p) { ui.panel.appendChild(p); });
    root.appendChild(ui.panel);
    root.appendChild(ui.bubble);
    label();

    ui.bubble.addEventListener('click', function () { toggle(ui.panel.hidden); });
    ui.close.addEventListener('click', function () { toggle(false); });
    ui.panel.addEventListener('keydown', function (e) { if (e.key === 'Escape') { toggle(false); } });
    ui.input.addEventListener('keydown', function (e) {
      if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); ui.form.requestSubmit(); }
    });
    ui.form.addEventListener('submit', function (e) {
      e.preventDefault();
      var text = ui.input.value.trim();
      if (!text) { return; }
      ui.input.value = '';
      send({ texto: text }, text);
    });
  }

  function label() {
    ui.bubble.setAttribute('aria-label', t('open'));
    ui.close.setAttribute('aria-label', t('close'));
    ui.label.textContent = t('input');
    ui.input.setAttribute('placeholder', t('placeholder'));
    ui.send.textContent = t('send');
    ui.options.setAttribute('aria-label', t('options'));
    showUnread();
  }

  function toggle(show) {
    ui.panel.hidden = !show;
    ui.bubble.setAttribute('aria-expanded', String(show));
    if (show) {
      unread = 0;
      showUnread();
      ui.input.focus();
      ui.log.scrollTop = ui.log.scrollHeight;
    } else {
      ui.bubble.focus();
    }
  }

  function showUnread() {
    ui.badge.hidden = unread === 0;
    ui.badge.textContent = unread ? String(unread) : '';
    ui.badge.setAttribute('aria-label', unread + ' ' + t('unread'));
  }

  function uuid() {
    if (window.crypto && crypto.randomUUID) { return crypto.randomUUID(); }
    return String(Date.now()) + '-' + String(Math.random()).slice(2);
  }

  /* A post keeps its id across retries: the server stores it once. */
  function send(body, shown) {
    body.id = uuid();
    options([], []);
    if (shown) {
      var item = bubble({ papel: 'user', texto: shown });
      item.classList.add('pendente');
      pending.push(item);
    }
    ui.status.textContent = t('typing');
    var attempt = function (n) {
      return call('/mensagens', body).then(function (r) {
        ui.status.textContent = '';
        if (r.status === 200) {
          if (r.body.idioma && TEXTS[r.body.idioma] && r.body.idioma !== lang) { lang = r.body.idioma; label(); }
          options(r.body.botoes || [], r.body.escolhas || []);
        } else if (r.status === 429) {
          ui.status.textContent = t('slow');
        } else if (r.status >= 500 && n < 3) {
          return wait(1000 * (n + 1)).then(function () { return attempt(n + 1); });
        } else {
          ui.status.textContent = t('retry');
        }
      }, function () {
        if (n < 3) { return wait(1000 * (n + 1)).then(function () { return attempt(n + 1); }); }
        ui.status.textContent = t('retry');
      });
    };
    return attempt(0);
  }

  function wait(ms) { return new Promise(function (ok) { setTimeout(ok, ms); }); }

  function options(buttons, choices) {
    ui.options.textContent = '';
    buttons.forEach(function (b) {
      var btn = el('button', { type: 'button' }, b.titulo);
      btn.addEventListener('click', function () { send({ texto: b.titulo, toque: b.toque }, b.titulo); });
      ui.options.appendChild(btn);
    });
    choices.forEach(function (c, i) {
      var btn = el('button', { type: 'button' }, c);
      btn.addEventListener('click', function () { send({ texto: c, escolha: i }, c); });
      ui.options.appendChild(btn);
    });
  }

  function copier(label, value) {
    var btn = el('button', { type: 'button', class: 'acao copiar' }, label);
    btn.addEventListener('click', function () {
      var done = function () { ui.status.textContent = t('copied'); btn.textContent = t('copied'); };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(value).then(done, function () { fallbackCopy(value); done(); });
      } else {
        fallbackCopy(value);
        done();
      }
    });
    return btn;
  }

  function fallbackCopy(value) {
    var area = el('textarea', { class: 'oculto', 'aria-hidden': 'true' });
    area.value = value;
    root.appendChild(area);
    area.select();
    try { document.execCommand('copy'); } catch (e) { /* nothing else to try */ }
    root.removeChild(area);
  }

  /* The product's emphasis (`*sim*`, as WhatsApp marks it) in bold, built as elements: no markup of a
     message is ever parsed as HTML. The rule is the server's (`outbox::emphasis`): a mark opens after
     no letter, digit or star and before a non-space, closes after a non-space and before no letter,
     digit or star, on one line — a masked card's stars (`****7890`) stay text. */
  function marked(text) {
    var span = el('span', { class: 'texto' });
    var s = String(text || '');
    var word = /[0-9A-Za-z\u00C0-\u024F*]/;
    var opens = function (i) {
      return s[i] === '*' && (i === 0 || !word.test(s[i - 1])) && i + 1 < s.length && !/[\s*]/.test(s[i + 1]);
    };
    var closes = function (j) {
      return s[j] === '*' && !/\s/.test(s[j - 1]) && (j + 1 >= s.length || !word.test(s[j + 1]));
    };
    var plain = '';
    var i = 0;
    while (i < s.length) {
      var j = -1;
      if (opens(i)) {
        for (var k = i + 2; k < s.length && s[k] !== '\n'; k += 1) {
          if (s[k] === '*') { j = closes(k) ? k : -1; break; }
        }
      }
      if (j > 0) {
        if (plain) { span.appendChild(document.createTextNode(plain)); plain = ''; }
        span.appendChild(el('strong', {}, s.slice(i + 1, j)));
        i = j + 1;
      } else {
        plain += s[i];
        i += 1;
      }
    }
    if (plain) { span.appendChild(document.createTextNode(plain)); }
    return span;
  }

  function bubble(m) {
    var item = el('li', { class: 'msg ' + m.papel });
    if (m.papel === 'human_agent') {
      item.appendChild(el('span', { class: 'quem' }, (m.nome || '') + ' · ' + t('agent')));
    } else {
      item.appendChild(el('span', { class: 'oculto' }, m.papel === 'user' ? t('you') + ': ' : (session.nome || t('chat')) + ': '));
    }
    item.appendChild(m.papel === 'user' ? el('span', { class: 'texto' }, m.texto) : marked(m.texto));
    if (m.pix) {
      item.classList.add('pix');
      item.appendChild(el('img', { src: 'data:image/png;base64,' + m.pix.qr_png_base64, alt: t('qr') }));
      item.appendChild(copier(t('copy'), m.pix.copia_e_cola));
    }
    if (m.cartao && /^https?:\/\//.test(m.cartao.link)) {
      item.appendChild(el('a', { class: 'acao pagar', href: m.cartao.link, target: '_blank', rel: 'noopener noreferrer' }, t('pay')));
    }
    if (m.boleto) {
      item.appendChild(el('span', { class: 'linha' }, m.boleto.linha));
      item.appendChild(copier(t('copyLine'), m.boleto.linha));
    }
    ui.log.appendChild(item);
    ui.log.scrollTop = ui.log.scrollHeight;
    return item;
  }

  /* Each stored message once: by its id; the person's own replaces its pending copy. */
  function show(m) {
    if (seen[m.id]) { return; }
    seen[m.id] = true;
    lastId = Math.max(lastId, m.id);
    if (m.papel === 'user' && pending.length) {
      var item = pending.shift();
      item.classList.remove('pendente');
      item.setAttribute('data-id', String(m.id));
      item.querySelector('.texto').textContent = m.texto;
      return;
    }
    bubble(m).setAttribute('data-id', String(m.id));
    if (!m.historico && ((m.escolhas && m.escolhas.length) || (m.botoes && m.botoes.length))) {
      options(m.botoes || [], m.escolhas || []);
    }
    if (ui.panel.hidden && m.papel !== 'user' && !m.historico) { unread += 1; showUnread(); }
  }

  /* The stream is reopened by the widget itself, after the last message it has. */
  function listen() {
    var url = api + '/eventos' + (lastId ? '?ultimo=' + lastId : '');
    stream = new EventSource(url, { withCredentials: true });
    stream.addEventListener('open', function () { backoff = 1000; state('conectado'); ui.status.textContent = ''; });
    stream.addEventListener('mensagem', function (e) {
      try { show(JSON.parse(e.data)); } catch (err) { /* a malformed event is skipped */ }
    });
    stream.addEventListener('error', function () {
      stream.close();
      state('reconectando');
      ui.status.textContent = t('offline');
      setTimeout(function () {
        open().then(listen, listen);
      }, backoff);
      backoff = Math.min(backoff * 2, 10000);
    });
  }

  function start() {
    document.body.appendChild(host);
    open().then(function () {
      build();
      listen();
    }, function () {
      state('recusado');
    });
  }

  if (document.body) { start(); } else { document.addEventListener('DOMContentLoaded', start); }
})();
