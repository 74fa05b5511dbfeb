import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { ConfirmDialog } from '../../../ui/ConfirmDialog.js';
import { CHANNEL_LABELS, disconnect, stateLabel, type Connection } from './channels-data.js';

/** One channel: its name and state (`error` with its reason), its body, and "Disconnect". */
export function ChannelCard(props: { connection: Connection; children: ComponentChildren }) {
  const c = props.connection;
  const label = CHANNEL_LABELS[c.channel];
  const [confirming, setConfirming] = useState(false);
  const headingId = `channel-${c.channel}`;
  return (
    <section class="panel stack channel" aria-labelledby={headingId}>
      <div class="section-head">
        <h2 id={headingId}>{label}</h2>
        <span class={`state ${c.status}`}>{stateLabel(c)}</span>
      </div>
      {c.status === 'error' && c.error && (
        <p class="error-text">
          The provider refused the credentials: <q>{c.error}</q>
        </p>
      )}
      {props.children}
      {c.id !== null && (
        <div class="form-actions">
          <button type="button" class="button ghost danger" onClick={() => setConfirming(true)}>
            Disconnect {label}
          </button>
        </div>
      )}
      {confirming && (
        <ConfirmDialog
          title={`Disconnect ${label}?`}
          action="Disconnect"
          onConfirm={() => disconnect(c.channel)}
          onClose={() => setConfirming(false)}
        >
          <p>
            {label} goes back to the sandbox (or to not connected): messages on it are no longer
            sent through your account, and its settings are forgotten.
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}
