import { onLinkClick } from '../../lib/router.js';
import type { Checklist as Model } from './checklist.js';
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
          </div>
        </li>
      ))}
    </ol>
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
