import { errorText } from '../../api/errors.js';
import type { Channel } from '../../api/types.js';
import { useAction } from '../../lib/query.js';
import { navigate, onLinkClick } from '../../lib/router.js';
import type { Checklist as Model } from './checklist.js';
import { trySandbox } from './sandbox.js';
import './getting-started.css';

/** The steps, each with whether it is done and a link to where it is done. */
export function ChecklistSteps({ checklist }: { checklist: Model }) {
  return (
    <ol class="checklist" aria-label="Getting started steps">
      {checklist.steps.map((s) => (
        <li key={s.id} class={s.done ? 'done' : ''}>
          <span class="check" aria-hidden="true">
            {s.done ? '✓' : ''}
          </span>
          <div class="step-text">
            <a href={`/app${s.path}`} onClick={onLinkClick(s.path)}>
              {s.title}
            </a>
            <span class={`pill ${s.done ? 'done' : ''}`}>{s.done ? 'Done' : 'Not done'}</span>
            <p class="hint">{s.description}</p>
            {s.id === 'channel' && !s.done && checklist.sandbox && (
              <TrySandbox channel={checklist.sandbox} />
            )}
          </div>
        </li>
      ))}
    </ol>
  );
}

const CHANNEL_NAMES: Record<Channel, string> = {
  whatsapp: 'WhatsApp',
  instagram: 'Instagram',
  messenger: 'Messenger',
  webchat: 'Website chat',
};

/** "Try the sandbox": a sample customer writes in, and the admin lands in that conversation. */
function TrySandbox({ channel }: { channel: Channel }) {
  const start = useAction(async () => navigate(`/conversations/${await trySandbox(channel)}`));
  return (
    <div class="step-action">
      <button
        type="button"
        class="button small"
        disabled={start.pending}
        aria-describedby="try-sandbox-hint"
        onClick={() => void start.run()}
      >
        Try the sandbox
      </button>
      <span id="try-sandbox-hint" class="muted small">
        A sample customer writes in on {CHANNEL_NAMES[channel]} (simulated); you answer in the
        inbox.
      </span>
      {start.error && <p role="alert">{errorText(start.error)}</p>}
    </div>
  );
}

/** The inbox's panel: shown to admins until dismissed or every step is done. */
export function GettingStartedPanel({ checklist }: { checklist: Model }) {
  if (!checklist.forMe || checklist.dismissed || checklist.allDone || checklist.loading)
    return null;
  return (
    <section class="getting-started-panel" aria-labelledby="getting-started-title">
      <div class="panel-head">
        <h2 id="getting-started-title">Getting started</h2>
        <span class="muted small">
          {checklist.doneCount} of {checklist.steps.length} done
        </span>
        <span class="spacer" />
        <a href="/app/getting-started" onClick={onLinkClick('/getting-started')} class="small">
          Open
        </a>
        <button type="button" class="button ghost small" onClick={checklist.dismiss}>
          Dismiss
        </button>
      </div>
      <ChecklistSteps checklist={checklist} />
    </section>
  );
}
