// The dashboard's shell: sign-in, a router over location.hash, and
// polling of the live parts of a view. Every view is an HTML fragment made
// by the gateway (GET /ui/view/...) from the read API with the caller's
// key; this script only fetches, swaps and polls. It builds no markup from
// data: fragments come escaped from the server's templates.
'use strict';
(() => {
  const KEY = 'ttfx.key';
  const VIEWS = ['overview', 'requests', 'channels'];
  // How often each view's live part is refreshed, in ms. The request list
  // is a single indexed page and cheap; the overview runs percentiles over
  // the window, so it is polled less often.
  const POLL = { overview: 10000, requests: 2000, channels: 5000 };
  const TITLES = { overview: 'Overview', requests: 'Requests', channels: 'Channels', request: 'Request' };
  const tz = String(-new Date().getTimezoneOffset());

  const $ = (sel, el = document) => el.querySelector(sel);
  const view = $('#view');
  let current = null;
  let seq = 0; // the latest navigation; older answers are dropped
  let timer = 0;
  let known = new Set();
  // Rows that arrived by polling stay marked for a while, across the
  // polls that replace them.
  const FRESH_MS = 15000;
  const freshUntil = new Map();

  const getKey = () => sessionStorage.getItem(KEY) || '';

  function parseRoute() {
    const h = location.hash.replace(/^#\/?/, '');
    const q = h.indexOf('?');
    const path = q < 0 ? h : h.slice(0, q);
    const params = new URLSearchParams(q < 0 ? '' : h.slice(q + 1));
    if (path.startsWith('request/')) {
      return { view: 'request', id: decodeURIComponent(path.slice('request/'.length)), params };
    }
    return { view: VIEWS.includes(path) ? path : 'overview', params };
  }

  function viewURL(r) {
    const p = new URLSearchParams(r.params);
    p.set('tz', tz);
    const name = r.view === 'request' ? 'request/' + encodeURIComponent(r.id) : r.view;
    return '/ui/view/' + name + '?' + p.toString();
  }

  async function get(url, key) {
    const res = await fetch(url, { headers: { Authorization: 'Bearer ' + key }, cache: 'no-store' });
    const text = await res.text();
    if (!res.ok) {
      let msg = res.status + ' ' + res.statusText;
      try { msg = JSON.parse(text).error.message || msg; } catch (_) { /* not JSON */ }
      const err = new Error(msg);
      err.status = res.status;
      throw err;
    }
    return text;
  }

  function stopPoll() {
    if (timer) clearTimeout(timer);
    timer = 0;
  }

  // liveText is the badge of a live part: when the gateway made it, on the
  // gateway's clock and in the request list's format and zone, so that the
  // badge and the rows' times can be compared at a glance.
  function liveText(el) {
    if (!el) return '';
    return el.dataset.asof ? 'live · updated ' + el.dataset.asof : 'live';
  }

  function setLive(text) {
    const el = $('#live');
    el.hidden = !text;
    el.textContent = text || '';
  }

  function showLogin(message) {
    stopPoll();
    seq++;
    current = null;
    view.replaceChildren();
    for (const id of ['#nav', '#who', '#logout']) $(id).hidden = true;
    setLive('');
    $('#login').hidden = false;
    const err = $('#login-error');
    err.hidden = !message;
    err.textContent = message || '';
    document.title = 'Sign in · ttfx';
    $('#key').focus();
  }

  function setWho(who) {
    const el = $('#who');
    el.textContent = who.name + ' · ' + who.role + (who.group ? ' · group ' + who.group : '');
    el.hidden = false;
    $('#nav').hidden = false;
    $('#logout').hidden = false;
    $('#login').hidden = true;
  }

  function rowIDs() {
    return new Set([...view.querySelectorAll('tr[data-id]')].map((tr) => tr.dataset.id));
  }

  function failed(err) {
    setLive('');
    if (err.status === 401) {
      sessionStorage.removeItem(KEY);
      showLogin('Signed out: ' + err.message);
      return;
    }
    const box = document.createElement('div');
    box.className = 'card error-box';
    box.setAttribute('role', 'alert');
    const h = document.createElement('h1');
    h.textContent = err.status ? 'The gateway answered ' + err.status : 'The gateway could not be reached';
    const p = document.createElement('p');
    p.textContent = err.message;
    box.append(h, p);
    view.replaceChildren(box);
  }

  async function show() {
    stopPoll();
    if (!getKey()) {
      showLogin('');
      return;
    }
    const r = parseRoute();
    current = r;
    const my = ++seq;
    for (const a of document.querySelectorAll('[data-nav]')) {
      a.classList.toggle('active', a.dataset.nav === r.view || (r.view === 'request' && a.dataset.nav === 'requests'));
    }
    document.title = TITLES[r.view] + ' · ttfx';
    view.classList.add('loading');
    try {
      const html = await timed(viewURL(r));
      if (my !== seq) return;
      view.innerHTML = html;
      known = rowIDs();
      setLive(liveText(view.querySelector('[data-live]')));
      schedule(my);
    } catch (err) {
      if (my === seq) failed(err);
    } finally {
      if (my === seq) view.classList.remove('loading');
    }
  }

  // lastCost is how long the last answer of this view took. A view that
  // is costly to make (a day of percentiles over a big store) is polled
  // less often, so that an open tab never keeps the gateway's store busy
  // for more than a tenth of the time.
  let lastCost = 0;

  function schedule(my) {
    const every = POLL[current && current.view];
    if (!every || !view.querySelector('[data-live]')) return;
    timer = setTimeout(() => poll(my), Math.max(every, 10 * lastCost));
  }

  async function timed(url) {
    const start = performance.now();
    try {
      return await get(url, getKey());
    } finally {
      lastCost = performance.now() - start;
    }
  }

  // poll refreshes the parts of the view marked data-live, leaving the
  // filter form (and whatever is being typed in it) alone, and marks rows
  // that were not there before.
  async function poll(my) {
    timer = 0;
    if (my !== seq) return;
    if (document.hidden) {
      schedule(my);
      return;
    }
    try {
      const html = await timed(viewURL(current));
      if (my !== seq) return;
      const tpl = document.createElement('template');
      tpl.innerHTML = html;
      for (const fresh of tpl.content.querySelectorAll('[data-live][id]')) {
        const old = document.getElementById(fresh.id);
        if (old) old.replaceWith(fresh);
      }
      const t = Date.now();
      for (const tr of view.querySelectorAll('tr[data-id]')) {
        const id = tr.dataset.id;
        if (!known.has(id)) freshUntil.set(id, t + FRESH_MS);
        if ((freshUntil.get(id) || 0) > t) tr.classList.add('fresh');
      }
      for (const [id, until] of freshUntil) if (until <= t) freshUntil.delete(id);
      known = rowIDs();
      setLive(liveText(view.querySelector('[data-live]')));
    } catch (err) {
      if (my !== seq) return;
      if (err.status === 401) {
        failed(err);
        return;
      }
      setLive('live · paused: ' + err.message);
    }
    schedule(my);
  }

  async function login(key, quiet) {
    try {
      const who = JSON.parse(await get('/ui/view/session', key));
      sessionStorage.setItem(KEY, key);
      setWho(who);
      await show();
    } catch (err) {
      sessionStorage.removeItem(KEY);
      showLogin(quiet && !err.status ? '' : (err.status === 401 ? 'That key was not accepted: ' : '') + err.message);
    }
  }

  document.addEventListener('submit', (ev) => {
    const form = ev.target;
    if (form.id === 'login-form') {
      ev.preventDefault();
      const input = $('#key');
      const key = input.value.trim();
      input.value = '';
      if (key) login(key);
      return;
    }
    if (form.matches('form.filters')) {
      ev.preventDefault();
      const data = new FormData(form);
      const since = data.get('since');
      const p = new URLSearchParams();
      for (const [k, v] of data) {
        if (!v) continue;
        if ((k === 'from' || k === 'to') && since) continue;
        p.set(k, v);
      }
      const target = '#/' + form.dataset.view + (p.toString() ? '?' + p.toString() : '');
      if (location.hash === target) show();
      else location.hash = target;
    }
  });

  document.addEventListener('change', (ev) => {
    const el = ev.target;
    if (el.matches && el.matches('form.filters select')) el.form.requestSubmit();
  });

  // The Channels view's operator actions (an admin key): POST
  // /api/channels/{name}/{action}, then the view again.
  document.addEventListener('click', async (ev) => {
    const b = ev.target.closest && ev.target.closest('button[data-channel-action]');
    if (!b) return;
    b.disabled = true;
    try {
      const res = await fetch('/api/channels/' + encodeURIComponent(b.dataset.name) + '/' + b.dataset.channelAction,
        { method: 'POST', headers: { Authorization: 'Bearer ' + getKey() }, cache: 'no-store' });
      if (!res.ok) {
        let msg = res.status + ' ' + res.statusText;
        try { msg = (await res.json()).error.message || msg; } catch (_) { /* not JSON */ }
        alert(msg);
      }
    } finally {
      b.disabled = false;
      show();
    }
  });

  $('#logout').addEventListener('click', () => {
    sessionStorage.removeItem(KEY);
    history.replaceState(null, '', '#/overview');
    showLogin('Signed out.');
  });

  // `ttfx demo` can print /ui/#key=KEY: take the key from the fragment
  // (never sent to the server, so never in a log), then drop it from the
  // address and the history.
  function keyFromHash() {
    const m = location.hash.match(/^#key=([^&]+)/);
    if (!m) return false;
    history.replaceState(null, '', location.pathname + '#/overview');
    login(decodeURIComponent(m[1]));
    return true;
  }

  window.addEventListener('hashchange', () => {
    if (keyFromHash()) return;
    if (getKey()) show();
  });

  if (!keyFromHash()) {
    if (getKey()) login(getKey(), true);
    else showLogin('');
  }
})();
