// The dashboard page: preact + htm (vendored, no build step), uPlot for the sparklines. It polls
// api/overview once a second; the dead letters of the selected queue are polled with it.
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
              <td class="mono">${e.keys.join(', ')}</td>
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

function Payload({ value }) {
  if (value === undefined) return html`<span class="muted">none</span>`;
  const text = JSON.stringify(value);
  return html`<code class="payload" title=${text}
    >${text.length > 120 ? `${text.slice(0, 120)}…` : text}</code
  >`;
}

function QueuesView({ data, selected, setSelected, act }) {
  const { queues, now, readOnly } = data;
  const [taskQuery, setTaskQuery] = useState('');
  const [task, setTask] = useState(undefined);
  const queue = queues.find((q) => q.name === selected) || queues[0];
  const dead = usePoll(
    () => (queue ? api(`queues/${encodeURIComponent(queue.name)}/dead?limit=50`) : []),
    [queue && queue.name],
  );
  const find = async (e) => {
    e.preventDefault();
    if (!queue || !taskQuery) return;
    try {
      const t = await api(
        `queues/${encodeURIComponent(queue.name)}/tasks/${encodeURIComponent(taskQuery)}`,
      );
      setTask({ found: t });
    } catch (err) {
      setTask({ error: err.message });
    }
  };
  return html`
    <section>
      <h2>Queues <span class="count">${queues.length}</span></h2>
      ${data.queuesTruncated && html`<p class="note">More queues exist than are shown.</p>`}
      <${Table}
        headers=${['Queue', 'Ready', 'Delayed', 'Leased', 'Dead', 'Next ready waited', 'Completed / s (60 s)', '']}
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
              <td>${q.delayed}</td>
              <td data-testid="leased">${q.leased}</td>
              <td data-testid="dead" class=${q.dead > 0 ? 'bad' : ''}>${q.dead}</td>
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
                        `queues/${encodeURIComponent(q.name)}/${q.paused ? 'resume' : 'pause'}`,
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
          ${task && task.error && html`<p class="note">${task.error}</p>`}
          ${
            task &&
            task.found &&
            html`<dl class="task" data-testid="task">
              <dt>Id</dt>
              <dd class="mono">${task.found.id}</dd>
              <dt>State</dt>
              <dd>${task.found.state}</dd>
              <dt>Attempts</dt>
              <dd>${task.found.attempts}</dd>
              ${
                task.found.group &&
                html`<dt>Group</dt>
                  <dd>${task.found.group}</dd>`
              }
              ${
                task.found.priority !== undefined &&
                html`<dt>Priority</dt>
                  <dd>${task.found.priority}</dd>`
              }
              <dt>Last error</dt>
              <dd>${task.found.lastError || '–'}</dd>
              <dt>Payload</dt>
              <dd><${Payload} value=${task.found.payload} /></dd>
            </dl>`
          }
        </section>
        <section>
          <h2>Dead letters of <span class="mono">${queue.name}</span></h2>
          ${dead.error && html`<p class="note">${dead.error}</p>`}
          <${Table}
            headers=${['Id', 'Died', 'Attempts', 'Last error', 'Payload', '']}
            empty="No dead task."
            rows=${(dead.data || []).map(
              (t) =>
                html`<tr data-testid="dead-row" data-id=${t.id} key=${t.id}>
                  <td class="mono nowrap">${t.id}</td>
                  <td>${clock(t.time)}</td>
                  <td>${t.attempts}</td>
                  <td class="error">${t.lastError || '–'}</td>
                  <td><${Payload} value=${t.payload} /></td>
                  <td class="actions">
                    ${
                      !readOnly &&
                      html`<button
                          data-testid="requeue"
                          onClick=${() =>
                            act(
                              `queues/${encodeURIComponent(queue.name)}/tasks/${encodeURIComponent(t.id)}/requeue`,
                              'POST',
                            )}
                        >
                          Requeue
                        </button>
                        <button
                          class="danger"
                          data-testid="delete"
                          onClick=${() =>
                            confirm(`Delete task ${t.id}?`) &&
                            act(
                              `queues/${encodeURIComponent(queue.name)}/tasks/${encodeURIComponent(t.id)}`,
                              'DELETE',
                            )}
                        >
                          Delete
                        </button>`
                    }
                  </td>
                </tr>`,
            )}
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
