// purra approvals: live updates (server-sent events), time left, decisions without leaving the page.
'use strict';
(function () {
  const list = document.getElementById('list');
  const status = document.getElementById('status');
  const view = document.body.dataset.view;
  if (!list || !view) return;
  let queued = false;
  let timer = null;
  // The list as last fetched: an unchanged list is not replaced (focus and selection stay).
  let last = null;

  // A note being written is never replaced under the writer's hands: updates wait until it is
  // sent or emptied and left.
  function writing() {
    for (const t of list.querySelectorAll('textarea')) {
      // An arguments editor holds the list only once edited (it starts with the arguments).
      const begun = t.classList.contains('edit') ? t.value !== t.defaultValue : t.value.trim() !== '';
      if (begun || t === document.activeElement) return true;
    }
    return false;
  }

  // Approve with edit: the edited arguments checked live against the tool's input schema (a
  // small subset of JSON Schema: type, required, properties, additionalProperties, enum, const,
  // minLength, maxLength, pattern, minimum, maximum, items, minItems, maxItems). The gateway
  // checks everything again; this only says early what it would refuse.
  function typeOf(v) {
    if (v === null) return 'null';
    if (Array.isArray(v)) return 'array';
    if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
    return typeof v;
  }

  function check(schema, v, at) {
    if (schema === true || schema === undefined || schema === null) return null;
    if (schema === false) return at + ': no value is allowed here';
    if (schema.type !== undefined) {
      const types = Array.isArray(schema.type) ? schema.type : [schema.type];
      const t = typeOf(v);
      if (!types.some(function (x) { return x === t || (x === 'number' && t === 'integer'); })) {
        return at + ': must be ' + types.join(' or ') + ', not ' + t;
      }
    }
    if (schema.enum && !schema.enum.some(function (e) { return JSON.stringify(e) === JSON.stringify(v); })) {
      return at + ': must be one of ' + JSON.stringify(schema.enum);
    }
    if ('const' in schema && JSON.stringify(schema.const) !== JSON.stringify(v)) {
      return at + ': must be ' + JSON.stringify(schema.const);
    }
    if (typeof v === 'string') {
      const n = Array.from(v).length;
      if (schema.minLength !== undefined && n < schema.minLength) return at + ': at least ' + schema.minLength + ' characters';
      if (schema.maxLength !== undefined && n > schema.maxLength) return at + ': at most ' + schema.maxLength + ' characters';
      if (schema.pattern !== undefined) {
        try { if (!new RegExp(schema.pattern, 'u').test(v)) return at + ': must match ' + schema.pattern; } catch (e) { /* the gateway judges */ }
      }
    }
    if (typeof v === 'number') {
      if (schema.minimum !== undefined && v < schema.minimum) return at + ': at least ' + schema.minimum;
      if (schema.maximum !== undefined && v > schema.maximum) return at + ': at most ' + schema.maximum;
    }
    if (Array.isArray(v)) {
      if (schema.minItems !== undefined && v.length < schema.minItems) return at + ': at least ' + schema.minItems + ' items';
      if (schema.maxItems !== undefined && v.length > schema.maxItems) return at + ': at most ' + schema.maxItems + ' items';
      for (let i = 0; i < v.length; i++) {
        const e = check(schema.items, v[i], at + '/' + i);
        if (e) return e;
      }
    }
    if (typeOf(v) === 'object') {
      for (const r of schema.required || []) {
        if (!(r in v)) return at + ': "' + r + '" is required';
      }
      const props = schema.properties || {};
      for (const k of Object.keys(v)) {
        if (k in props) {
          const e = check(props[k], v[k], at + '/' + k);
          if (e) return e;
        } else if (schema.additionalProperties !== undefined) {
          if (schema.additionalProperties === false) return at + ': "' + k + '" is not allowed';
          const e = check(schema.additionalProperties, v[k], at + '/' + k);
          if (e) return e;
        }
      }
    }
    return null;
  }

  function validateEdit(t) {
    const error = document.getElementById(t.id.replace(/^edit-/, 'edit-error-'));
    const button = document.getElementById(t.id.replace(/^edit-/, 'edit-approve-'));
    let why = null;
    let value;
    try {
      value = JSON.parse(t.value);
    } catch (e) {
      why = 'not JSON: ' + e.message;
    }
    if (why === null && t.value === t.defaultValue) why = 'edit the arguments to approve with edit';
    if (why === null) {
      let schema = true;
      try { schema = JSON.parse(t.dataset.schema || 'true'); } catch (e) { schema = true; }
      const e = check(schema, value, 'arguments');
      if (e) why = 'does not match the tool\'s input schema: ' + e;
    }
    if (error) error.textContent = why === null ? '' : why;
    if (button) button.disabled = why !== null;
    t.dataset.valid = why === null ? 'yes' : 'no';
  }

  function validateEdits() {
    for (const t of list.querySelectorAll('textarea.edit')) validateEdit(t);
  }

  list.addEventListener('input', function (e) {
    if (e.target.matches('textarea.edit')) validateEdit(e.target);
  });

  function left(ms) {
    const s = Math.floor(ms / 1000);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    return (h ? h + 'h ' : '') + (h || m ? m + 'm ' : '') + r + 's';
  }

  function tick() {
    for (const el of document.querySelectorAll('[data-expires-ms]')) {
      const ms = Number(el.dataset.expiresMs) - Date.now();
      el.textContent = ms <= 0 ? 'expired' : 'expires in ' + left(ms);
    }
    // A caller's wait that ended: approving now sends on the next identical call (or anyway).
    for (const el of document.querySelectorAll('[data-waiting-until-ms]')) {
      if (Number(el.dataset.waitingUntilMs) <= Date.now()) {
        const b = document.createElement('b');
        b.textContent = el.dataset.then;
        el.replaceChildren(b);
        el.dataset.onApprove = el.dataset.then.startsWith('nobody') ? 'next_call' : 'sends_now';
        el.removeAttribute('data-waiting-until-ms');
      }
    }
  }

  async function refresh() {
    if (writing()) {
      queued = true;
      document.body.classList.add('held');
      return;
    }
    queued = false;
    document.body.classList.remove('held');
    // The page of the list this page shows (`?before=ID`), as the server rendered it.
    const r = await fetch('/fragment/' + view + location.search, { credentials: 'same-origin' });
    if (r.status === 200) {
      const html = await r.text();
      // A note begun while the list was being fetched is kept too: the list waits again.
      if (writing()) {
        queued = true;
        document.body.classList.add('held');
        return;
      }
      if (html !== last) {
        last = html;
        list.innerHTML = html;
        validateEdits();
        tick();
      }
      document.body.dataset.synced = 'yes';
    } else if (r.status === 401 && !document.getElementById('signed-out')) {
      // The session ended: say so (what the status says stays) and link to the sign-in form.
      const p = document.createElement('p');
      p.id = 'signed-out';
      const a = document.createElement('a');
      a.href = '/login';
      a.textContent = 'Your session has ended: sign in again';
      p.appendChild(a);
      status.after(p);
    }
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(refresh, 50);
  }

  list.addEventListener('focusout', function () {
    setTimeout(function () { if (queued) schedule(); }, 0);
  });

  list.addEventListener('submit', async function (e) {
    const form = e.target;
    if (!form.matches('form.decide, form.reconcile')) return;
    e.preventDefault();
    const body = new URLSearchParams(new FormData(form, e.submitter));
    for (const b of form.querySelectorAll('button')) b.disabled = true;
    let message;
    let outcome = 'failed';
    try {
      const r = await fetch(form.action, {
        method: 'POST',
        body: body,
        credentials: 'same-origin',
        headers: { 'Accept': 'application/json' },
      });
      const answer = await r.json();
      message = answer.message;
      outcome = r.ok ? 'done' : (r.status === 409 ? 'conflict' : 'refused');
    } catch (err) {
      message = 'The request failed: ' + err;
    }
    status.textContent = message;
    status.dataset.outcome = outcome;
    for (const t of form.querySelectorAll('textarea')) {
      // A refused edit stays to be corrected; anything decided is cleared.
      if (!t.classList.contains('edit')) t.value = '';
      else if (outcome === 'done') t.value = t.defaultValue;
    }
    for (const b of form.querySelectorAll('button')) b.disabled = false;
    validateEdits();
    if (document.activeElement) document.activeElement.blur();
    schedule();
  });

  const events = new EventSource('/events');
  events.addEventListener('open', schedule);
  events.addEventListener('change', schedule);
  validateEdits();
  tick();
  setInterval(tick, 1000);
  document.body.dataset.live = 'ready';
})();
