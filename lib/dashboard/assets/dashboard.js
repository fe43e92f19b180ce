// The dashboard page: preact + htm (vendored, no build step), uPlot for the sparklines. It polls
// api/overview once a second; the task list of the selected queue and state, and the task found
// by the search, are polled with it.
import { html, render, useEffect, useRef, useState } from './htm-preact.mjs';

const POLL_MS = 1000;

async function api(path, init) {
  const res = await fetch(`api/${path}`, { ...init, headers: { accept: 'application/json' } });
  if (!res.ok) {
    const body = await res.json().catch(() => ({}));
    throw new Error(body.message || `${res.status} ${res.statusText}`);
  }
  return res.json();
}

function duration(ms) {
  if (ms === undefined || ms === null || ms < 0) return '–';
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.floor(s % 60)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

function clock(ms) {
  return new Date(ms).toLocaleTimeString([], { hour12: false });
}

function usePoll(load, deps) {
  const [state, setState] = useState({ data: undefined, error: undefined });
  useEffect(() => {
    let live = true;
    let timer;
    const tick = async () => {
      try {
        const data = await load();
        if (live) setState({ data, error: undefined });
      } catch (error) {
        if (live) setState((s) => ({ data: s.data, error: error.message }));
      }
      if (live) timer = setTimeout(tick, POLL_MS);
    };
    tick();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, deps);
  return state;
}

function Sparkline({ values }) {
  const box = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    const xs = values.map((_, i) => i - values.length);
    if (!plot.current) {
      plot.current = new window.uPlot(
        {
          width: 150,
          height: 36,
          legend: { show: false },
          cursor: { show: false },
          scales: { x: { time: false }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
          axes: [{ show: false }, { show: false }],
          series: [{}, { stroke: '#2563eb', fill: 'rgba(37, 99, 235, 0.15)', width: 1.5 }],
        },
        [xs, values],
        box.current,
      );
    } else plot.current.setData([xs, values]);
  }, [values.join(',')]);
  useEffect(() => () => plot.current && plot.current.destroy(), []);
  return html`<div class="spark" ref=${box}></div>`;
}

// The history charts of a queue: what ended per minute (1 h), per 10 minutes (24 h) or per hour
// (14 d) on every instance, from QueueService.metrics (each instance writes once a minute).
const HISTORY_RANGES = [
  ['1h', '1 h'],
  ['24h', '24 h'],
  ['14d', '14 d'],
];
const HISTORY_SERIES = [
  ['completed', '#16a34a'],
  ['failed', '#f59e0b'],
  ['dead', '#dc2626'],
  ['expired', '#6b7280'],
  ['cancelled', '#7c3aed'],
];
const HISTORY_POLL_MS = 30_000;

function History({ queue }) {
  const [range, setRange] = useState('1h');
  const [history, setHistory] = useState({ data: undefined, error: undefined });
  const box = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    let live = true;
    let timer;
    const load = async () => {
      try {
        const data = await api(`history?queue=${encodeURIComponent(queue)}&range=${range}`);
        if (live) setHistory({ data, error: undefined });
      } catch (error) {
        if (live) setHistory({ data: undefined, error: error.message });
      }
      if (live) timer = setTimeout(load, HISTORY_POLL_MS);
    };
    load();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [queue, range]);
  const data = history.data;
  useEffect(() => {
    if (!data || !box.current) return;
    const rows = [
      data.time.map((t) => t / 1000),
      ...HISTORY_SERIES.map(([key]) => data[key]),
      data.p95Ms,
    ];
    if (plot.current) plot.current.destroy();
    plot.current = new window.uPlot(
      {
        width: Math.max(320, box.current.clientWidth || 720),
        height: 200,
        scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
        axes: [
          {},
          { label: 'tasks' },
          { scale: 'ms', side: 1, label: 'p95 ms', grid: { show: false } },
        ],
        series: [
          {},
          ...HISTORY_SERIES.map(([label, stroke]) => ({ label, stroke, width: 1.5 })),
          { label: 'p95 ms', scale: 'ms', stroke: '#2563eb', dash: [4, 4], width: 1 },
        ],
      },
      rows,
      box.current,
    );
  }, [data]);
  useEffect(() => () => plot.current && plot.current.destroy(), []);
  const total = (key) => (data ? data[key].reduce((a, b) => a + b, 0) : 0);
  return html`<section data-testid="history">
    <div class="bar">
      <h2>History of <span class="mono">${queue}</span></h2>
      <div class="states" role="tablist">
        ${HISTORY_RANGES.map(
          ([r, label]) =>
            html`<button
              role="tab"
              class=${r === range ? 'active' : ''}
              data-testid=${`history-${r}`}
              onClick=${() => setRange(r)}
            >
              ${label}
            </button>`,
        )}
      </div>
    </div>
    ${history.error && html`<p class="note">${history.error}</p>`}
    <p class="muted" data-testid="history-totals" data-range=${data && data.range}>
      ${HISTORY_SERIES.map(
        ([key]) => html`<span>${key} <b data-testid=${`history-${key}`}>${total(key)}</b> </span>`,
      )}
    </p>
    <div class="history-chart" ref=${box}></div>
  </section>`;
}

function Line({ line, lineLength, now }) {
  if (lineLength === 0) return html`<span class="muted">none</span>`;
  return html`<ol class="line" data-testid="line">
    ${line.map(
      (w) =>
        html`<li data-testid="waiter">
          ${w.owner || '(unknown)'} <span class="muted">${w.mode}, ${duration(now - w.since)}</span>
        </li>`,
    )}
    ${lineLength > line.length && html`<li class="muted">${lineLength - line.length} lapsed</li>`}
  </ol>`;
}

// Callers waiting for the lock inside each instance (its local cohort), which the line above
// shows as one entry per instance, or not at all when they wait behind their own instance's holder.
function WaitingHere({ localWaiters }) {
  if (localWaiters.length === 0) return html`<span class="muted">none</span>`;
  return html`<ul class="here">
    ${localWaiters.map(
      (w) =>
        html`<li data-testid="local-waiters" data-instance=${w.instance}>
          ${w.instance} <span class="muted">${w.waiting} waiting here</span>
        </li>`,
    )}
  </ul>`;
}

function LocksView({ data, search, setSearch }) {
  const { locks, recent, now } = data;
  return html`
    <section>
      <div class="bar">
        <h2>Held locks <span class="count">${locks.items.length}</span></h2>
        <input
          type="search"
          placeholder="Search keys…"
          data-testid="lock-search"
          value=${search}
          onInput=${(e) => setSearch(e.target.value)}
        />
      </div>
      ${locks.unavailable && html`<p class="note">${locks.unavailable}</p>`}
      ${
        locks.truncated &&
        html`<p class="note">The scan stopped at its limit: search to narrow the list.</p>`
      }
      <${Table}
        headers=${['Key', 'Owner', 'Held for', 'TTL left', 'Fence', 'Waiting line', 'Waiting in instances']}
        empty=${`No lock is held${search ? ' with such a key' : ''}.`}
        rows=${locks.items.map(
          (l) =>
            html`<tr data-testid="lock-row" data-key=${l.key} key=${l.key}>
              <td class="mono">${l.key}</td>
              <td data-testid="owner">${l.owner || html`<span class="muted">(unknown)</span>`}</td>
              <td title="at least: since this dashboard first saw it held">
                ≥ ${duration(now - l.seenSince)}
              </td>
              <td>${duration(l.ttlMs)}</td>
              <td class="mono">${l.fence ?? '–'}</td>
              <td><${Line} line=${l.line} lineLength=${l.lineLength} now=${now} /></td>
              <td
                title="callers waiting inside each instance: behind its holder, or behind its place in the line"
              >
                <${WaitingHere} localWaiters=${l.localWaiters} />
              </td>
            </tr>`,
        )}
      />
    </section>
    <section>
      <h2>Recent timeouts and lost locks <span class="count">${recent.length}</span></h2>
      <${Table}
        headers=${['When', 'What', 'Keys', 'Why', 'Instance']}
        empty="None recorded."
        rows=${recent.map(
          (e) =>
            html`<tr data-testid="event-row">
              <td>${clock(e.at)}</td>
              <td>
                <span class=${`tag ${e.kind}`}>${e.kind === 'lost' ? 'lost' : 'timeout'}</span>
              </td>
              <td class="mono">
                ${e.keys.join(', ')}${e.keysTotal ? ` … (${e.keysTotal} in all)` : ''}
              </td>
              <td>
                ${e.reason}${e.waitedMs !== undefined ? ` after ${duration(e.waitedMs)}` : ''}
              </td>
              <td>${e.instance}</td>
            </tr>`,
        )}
      />
    </section>
  `;
}

/** A table with its header row, `rows` or else one row saying `empty`. */
function Table({ headers, empty, rows }) {
  return html`<table>
    <thead>
      <tr>
        ${headers.map((h) => html`<th>${h}</th>`)}
      </tr>
    </thead>
    <tbody>
      ${
        rows.length > 0
          ? rows
          : html`<tr>
              <td colspan=${headers.length} class="empty">${empty}</td>
            </tr>`
      }
    </tbody>
  </table>`;
}

// Task lists send payloads, results and progress as `{ json, truncated, chars }` (cut to 1,000
// characters by the server; a value over 64 KiB as `{ json: '', truncated, bytes }`, its size
// alone); a cell shows the first CELL_CHARS of it, the tooltip the rest. The text always goes in
// as text (preact escapes it), never as HTML.
const CELL_CHARS = 120;
// The task view shows whole values, pretty-printed, up to this many characters.
const BLOCK_CHARS = 10_000;

function JsonCell({ value, testid }) {
  if (!value) return html`<span class="muted">–</span>`;
  if (value.bytes !== undefined) {
    return html`<span class="muted" data-testid=${testid} title="open the task to see it"
      >${value.bytes.toLocaleString('en')} bytes</span
    >`;
  }
  const cut = value.truncated || value.json.length > CELL_CHARS;
  const shown = value.json.length > CELL_CHARS ? value.json.slice(0, CELL_CHARS) : value.json;
  const title = value.truncated ? `${value.json}… (${value.chars} characters in all)` : value.json;
  return html`<code class="payload" data-testid=${testid} title=${title}
    >${shown}${cut ? '…' : ''}</code
  >`;
}

function JsonBlock({ value, testid }) {
  if (value === undefined) return html`<span class="muted">–</span>`;
  const text = JSON.stringify(value, null, 2);
  const cut = text.length > BLOCK_CHARS;
  return html`<pre class="json" data-testid=${testid}>
${cut ? text.slice(0, BLOCK_CHARS) : text}${
      cut ? `\n… (${text.length} characters in all)` : ''
    }</pre>`;
}

function ErrorText({ error, lastError }) {
  if (error) {
    return html`<span class="error"
      ><span class="errname">${error.name}</span> ${error.message}</span
    >`;
  }
  if (lastError) return html`<span class="error">${lastError}</span>`;
  return html`<span class="muted">–</span>`;
}

// The task states, in the order the page shows them, with what their time means and the
// column that says how the task is doing or how it ended.
const STATES = [
  { state: 'ready', label: 'Ready', time: 'Due' },
  { state: 'delayed', label: 'Delayed', time: 'Due' },
  { state: 'leased', label: 'Leased', time: 'Lease expires', detail: 'Progress' },
  { state: 'completed', label: 'Completed', time: 'Finished', detail: 'Result' },
  { state: 'dead', label: 'Dead', time: 'Died', detail: 'Error' },
  { state: 'cancelled', label: 'Cancelled', time: 'Cancelled', detail: 'Error' },
  { state: 'expired', label: 'Expired', time: 'Expired' },
];
const CANCELLABLE = ['ready', 'delayed', 'leased'];
const REMOVABLE = ['ready', 'delayed', 'completed', 'dead', 'cancelled', 'expired'];

// Queue names and ids go in the query, never in a path segment: a browser drops a segment `.`
// or `..` (even percent-encoded) from the URL, and both are valid ids and queue names.
function taskParams(queue, id) {
  return `queue=${encodeURIComponent(queue)}&id=${encodeURIComponent(id)}`;
}

/** Cancel / Requeue / Delete for a task in `state` (none when read-only). */
function TaskActions({ queue, id, state, readOnly, act }) {
  if (readOnly) return null;
  return html`${
    CANCELLABLE.includes(state) &&
    html`<button
      data-testid="cancel"
      onClick=${() => confirm(`Cancel task ${id}?`) && act(`task/cancel?${taskParams(queue, id)}`, 'POST')}
    >
      Cancel
    </button>`
  }${
    state === 'dead' &&
    html`<button
      data-testid="requeue"
      onClick=${() => act(`task/requeue?${taskParams(queue, id)}`, 'POST')}
    >
      Requeue
    </button>`
  }${
    REMOVABLE.includes(state) &&
    html`<button
      class="danger"
      data-testid="delete"
      onClick=${() => confirm(`Delete task ${id}?`) && act(`task?${taskParams(queue, id)}`, 'DELETE')}
    >
      Delete
    </button>`
  }`;
}

function TaskDetail({ task, readOnly, act, now }) {
  const t = task;
  return html`<dl class="task" data-testid="task">
    <dt>Id</dt>
    <dd class="mono">${t.id}</dd>
    ${
      t.name !== undefined &&
      html`<dt>Name</dt>
        <dd data-testid="task-name">${t.name}</dd>`
    }
    <dt>State</dt>
    <dd data-testid="task-state">${t.state}</dd>
    <dt>Attempts</dt>
    <dd>${t.attempts}</dd>
    ${
      t.enqueuedAt !== undefined &&
      html`<dt>Enqueued</dt>
        <dd>
          ${clock(t.enqueuedAt)} <span class="muted">(${duration(now - t.enqueuedAt)} ago)</span>
        </dd>`
    }
    ${
      t.finishedAt !== undefined &&
      html`<dt>Finished</dt>
        <dd>${clock(t.finishedAt)}</dd>`
    }
    ${
      t.group &&
      html`<dt>Group</dt>
        <dd>${t.group}</dd>`
    }
    ${
      t.priority !== undefined &&
      html`<dt>Priority</dt>
        <dd>${t.priority}</dd>`
    }
    ${
      t.state === 'completed' &&
      html`<dt>Result</dt>
        <dd><${JsonBlock} value=${t.result} testid="task-result" /></dd>`
    }
    ${
      t.progress !== undefined &&
      html`<dt>Progress</dt>
        <dd><${JsonBlock} value=${t.progress} testid="task-progress" /></dd>`
    }
    ${
      (t.error || t.lastError) &&
      html`<dt>${t.state === 'dead' || t.state === 'cancelled' ? 'Error' : 'Last error'}</dt>
        <dd data-testid="task-error">
          <${ErrorText} error=${t.error} lastError=${t.lastError} />
          ${
            t.error &&
            t.error.stack &&
            html`<details>
              <summary class="muted">stack</summary>
              <pre class="json">${t.error.stack}</pre>
            </details>`
          }
        </dd>`
    }
    <dt>Payload</dt>
    <dd><${JsonBlock} value=${t.payload} testid="task-payload" /></dd>
    ${
      !readOnly &&
      html`<dt></dt>
        <dd class="actions">
          <${TaskActions}
            queue=${t.queue}
            id=${t.id}
            state=${t.state}
            readOnly=${readOnly}
            act=${act}
          />
        </dd>`
    }
  </dl>`;
}

function TaskList({ queue, state, readOnly, act, now }) {
  const spec = STATES.find((s) => s.state === state);
  const list = usePoll(
    () => api(`tasks?queue=${encodeURIComponent(queue.name)}&state=${state}&limit=${LIST_LIMIT}`),
    [queue.name, state],
  );
  const detail = (t) => {
    if (state === 'leased') return html`<${JsonCell} value=${t.progress} testid="progress" />`;
    if (state === 'completed') return html`<${JsonCell} value=${t.result} testid="result" />`;
    return html`<${ErrorText} error=${t.error} lastError=${t.lastError} />`;
  };
  const finished = ['completed', 'dead', 'cancelled', 'expired'].includes(state);
  const headers = ['Id', spec.time, 'Attempts'];
  if (spec.detail) headers.push(spec.detail);
  if (finished) headers.push('Progress');
  headers.push('Payload', '');
  const rows = (list.data || []).map(
    (t) =>
      html`<tr data-testid=${`${state}-row`} data-id=${t.id} key=${t.id}>
        <td class="mono nowrap">
          ${t.id}
          ${t.name !== undefined && html` <span class="muted" data-testid="row-name">${t.name}</span>`}
        </td>
        <td class="nowrap">
          ${clock(t.time)}
          ${
            (state === 'delayed' || state === 'leased') &&
            html`<span class="muted"> (in ${duration(t.time - now)})</span>`
          }
        </td>
        <td>${t.attempts}</td>
        ${spec.detail && html`<td data-testid="detail">${detail(t)}</td>`}
        ${finished && html`<td><${JsonCell} value=${t.progress} testid="progress" /></td>`}
        <td><${JsonCell} value=${t.payload} testid="payload" /></td>
        <td class="actions">
          <${TaskActions}
            queue=${queue.name}
            id=${t.id}
            state=${state}
            readOnly=${readOnly}
            act=${act}
          />
        </td>
      </tr>`,
  );
  const count = queue[state];
  return html`
    ${list.error && html`<p class="note">${list.error}</p>`}
    <${Table} headers=${headers} empty=${`No ${spec.label.toLowerCase()} task.`} rows=${rows} />
    ${
      count > rows.length &&
      rows.length === LIST_LIMIT &&
      html`<p class="muted">The first ${LIST_LIMIT} of ${count} shown.</p>`
    }
  `;
}

/** Tasks listed per state, at most. */
const LIST_LIMIT = 50;

function QueuesView({ data, selected, setSelected, act }) {
  const { queues, now, readOnly } = data;
  const [taskQuery, setTaskQuery] = useState('');
  const [lookup, setLookup] = useState(undefined);
  const [state, setState] = useState('dead');
  const queue = queues.find((q) => q.name === selected) || queues[0];
  // The task found by the search, polled like the rest (its progress and state change).
  const found = usePoll(
    () => (queue && lookup ? api(`task?${taskParams(queue.name, lookup)}`) : undefined),
    [queue && queue.name, lookup],
  );
  const find = (e) => {
    e.preventDefault();
    setLookup(taskQuery || undefined);
  };
  return html`
    <section>
      <h2>Queues <span class="count">${queues.length}</span></h2>
      ${data.queuesTruncated && html`<p class="note">More queues exist than are shown.</p>`}
      <${Table}
        headers=${['Queue', 'Ready', 'Delayed', 'Leased', 'Completed', 'Dead', 'Cancelled', 'Expired', 'Next ready waited', 'Completed / s (60 s)', '']}
        empty="No queue found."
        rows=${queues.map(
          (q) =>
            html`<tr
              data-testid="queue-row"
              data-queue=${q.name}
              key=${q.name}
              class=${queue && q.name === queue.name ? 'selected' : ''}
              onClick=${() => setSelected(q.name)}
            >
              <td class="mono">
                ${q.name} ${q.paused && html`<span class="tag paused">paused</span>`}
                ${q.workersHere > 0 && html`<span class="muted"> · ${q.workersHere} worker(s) here</span>`}
              </td>
              <td data-testid="ready">${q.ready}</td>
              <td data-testid="delayed">${q.delayed}</td>
              <td data-testid="leased">${q.leased}</td>
              <td data-testid="completed">${q.completed}</td>
              <td data-testid="dead" class=${q.dead > 0 ? 'bad' : ''}>${q.dead}</td>
              <td data-testid="cancelled">${q.cancelled}</td>
              <td data-testid="expired">${q.expired}</td>
              <td>${q.nextReadyEnqueuedAt ? duration(now - q.nextReadyEnqueuedAt) : '–'}</td>
              <td>
                <div class="sparkcell">
                  <${Sparkline} values=${q.throughput} />
                  <span class="muted">${q.throughput[q.throughput.length - 1]}</span>
                </div>
              </td>
              <td>
                ${
                  !readOnly &&
                  html`<button
                    data-testid=${q.paused ? 'resume' : 'pause'}
                    onClick=${(e) => {
                      e.stopPropagation();
                      act(
                        `queue/${q.paused ? 'resume' : 'pause'}?queue=${encodeURIComponent(q.name)}`,
                        'POST',
                      );
                    }}
                  >
                    ${q.paused ? 'Resume' : 'Pause'}
                  </button>`
                }
              </td>
            </tr>`,
        )}
      />
    </section>
    ${
      queue &&
      html`<section>
          <h2>
            Workers of <span class="mono">${queue.name}</span>
            <span class="count">${queue.workers.length}</span>
          </h2>
          <${Table}
            headers=${['Instance', 'Host', 'PID', 'Concurrency', 'Running', 'Names', 'Since']}
            empty="No worker on any instance."
            rows=${queue.workers.map(
              (w) =>
                html`<tr
                  data-testid="worker-row"
                  data-instance=${w.instance}
                  key=${`${w.instance}\0${w.since}`}
                >
                  <td class="mono">${w.instance}</td>
                  <td class="mono">${w.host}</td>
                  <td>${w.pid}</td>
                  <td data-testid="worker-concurrency">${w.concurrency}</td>
                  <td data-testid="worker-running">${w.running}</td>
                  <td class="mono">
                    ${w.names.length > 0 ? w.names.join(', ') : html`<span class="muted">all</span>`}
                  </td>
                  <td>${duration(now - w.since)}</td>
                </tr>`,
            )}
          />
        </section>
        <${History} key=${queue.name} queue=${queue.name} />
        <section>
          <div class="bar">
            <h2>Task search in <span class="mono">${queue.name}</span></h2>
            <form onSubmit=${find}>
              <input
                placeholder="Task id…"
                data-testid="task-search"
                value=${taskQuery}
                onInput=${(e) => setTaskQuery(e.target.value)}
              />
              <button type="submit">Find</button>
            </form>
          </div>
          ${lookup && found.error && html`<p class="note">${found.error}</p>`}
          ${
            lookup &&
            !found.error &&
            found.data &&
            found.data.id === lookup &&
            html`<${TaskDetail} task=${found.data} readOnly=${readOnly} act=${act} now=${now} />`
          }
        </section>
        <section>
          <div class="bar">
            <h2>Tasks of <span class="mono">${queue.name}</span></h2>
            <div class="states" role="tablist">
              ${STATES.map(
                (s) =>
                  html`<button
                    role="tab"
                    class=${s.state === state ? 'active' : ''}
                    data-testid=${`state-${s.state}`}
                    onClick=${() => setState(s.state)}
                  >
                    ${s.label} <span class="count">${queue[s.state]}</span>
                  </button>`,
              )}
            </div>
          </div>
          <${TaskList}
            key=${`${queue.name}\0${state}`}
            queue=${queue}
            state=${state}
            readOnly=${readOnly}
            act=${act}
            now=${now}
          />
        </section>`
    }
  `;
}

function App() {
  const [tab, setTab] = useState(location.hash === '#queues' ? 'queues' : 'locks');
  const [search, setSearch] = useState('');
  const [selected, setSelected] = useState(undefined);
  const [actionError, setActionError] = useState(undefined);
  const { data, error } = usePoll(
    () => api(`overview${search ? `?q=${encodeURIComponent(search)}` : ''}`),
    [search],
  );
  const show = (name) => {
    setTab(name);
    history.replaceState(null, '', `#${name}`);
  };
  const act = async (path, method) => {
    try {
      await api(path, { method });
      setActionError(undefined);
    } catch (err) {
      setActionError(err.message);
    }
  };
  return html`
    <header>
      <h1>Redis locks & queues</h1>
      <nav>
        <button
          class=${tab === 'locks' ? 'active' : ''}
          data-testid="tab-locks"
          onClick=${() => show('locks')}
        >
          Locks
        </button>
        <button
          class=${tab === 'queues' ? 'active' : ''}
          data-testid="tab-queues"
          onClick=${() => show('queues')}
        >
          Queues
        </button>
      </nav>
      <div class="status">
        ${data && data.readOnly && html`<span class="tag" data-testid="read-only">read-only</span>`}
        ${
          error
            ? html`<span class="tag lost">${error}</span>`
            : data && html`<span class="live">● live</span> ${clock(data.now)} · ${data.instanceId}`
        }
      </div>
    </header>
    ${actionError && html`<p class="note">${actionError}</p>`}
    ${
      !data
        ? html`<p class="muted">Loading…</p>`
        : tab === 'locks'
          ? html`<${LocksView} data=${data} search=${search} setSearch=${setSearch} />`
          : html`<${QueuesView}
              data=${data}
              selected=${selected}
              setSelected=${setSelected}
              act=${act}
            />`
    }
  `;
}

render(html`<${App} />`, document.getElementById('app'));
