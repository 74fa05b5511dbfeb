import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { useAction } from '../../../lib/query.js';
import { Dialog } from '../../../ui/Dialog.js';
import { CHANNEL_LABELS, disconnect, stateLabel, type Connection } from './channels-data.js';

/** One channel: its name and state (`error` with its reason), its body, and "Disconnect". */
export function ChannelCard(props: { connection: Connection; children: ComponentChildren }) {
  const c = props.connection;
  const label = CHANNEL_LABELS[c.channel];
  const [confirming, setConfirming] = useState(false);
  const remove = useAction(async () => {
    await disconnect(c.channel);
    setConfirming(false);
  });
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
      {remove.error && <p role="alert">{remove.error.message}</p>}
      {confirming && (
        <Dialog title={`Disconnect ${label}?`} onClose={() => setConfirming(false)}>
          <div class="stack">
            <p>
              {label} goes back to the sandbox (or to not connected): messages on it are no longer
              sent through your account, and its settings are forgotten.
            </p>
            <div class="dialog-actions">
              <button type="button" class="button ghost" onClick={() => setConfirming(false)}>
                Cancel
              </button>
              <button
                type="button"
                class="button primary danger"
                disabled={remove.pending}
                onClick={() => void remove.run()}
              >
                Disconnect
              </button>
            </div>
          </div>
        </Dialog>
      )}
    </section>
  );
}
