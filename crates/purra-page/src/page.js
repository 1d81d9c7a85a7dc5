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
      if (t.value.trim() !== '' || t === document.activeElement) return true;
    }
    return false;
  }

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
    for (const t of form.querySelectorAll('textarea')) t.value = '';
    if (document.activeElement) document.activeElement.blur();
    schedule();
  });

  const events = new EventSource('/events');
  events.addEventListener('open', schedule);
  events.addEventListener('change', schedule);
  tick();
  setInterval(tick, 1000);
  document.body.dataset.live = 'ready';
})();
