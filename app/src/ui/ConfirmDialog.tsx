import type { ComponentChildren } from 'preact';
import { errorText } from '../api/errors.js';
import { useAction } from '../lib/query.js';
import { Dialog } from './Dialog.js';
import './ui.css';

/**
 * "Are you sure?" before what cannot be undone: the confirming button names the action, a
 * refusal stays in the dialog as an alert, and the dialog closes once the action is done.
 */
export function ConfirmDialog(props: {
  title: string;
  action: string;
  /** The other button (default "Cancel"). */
  keep?: string;
  /** Filled red for what destroys; plain for what only stops (cancelling a broadcast). */
  destructive?: boolean;
  children: ComponentChildren;
  onConfirm: () => Promise<unknown>;
  onClose: () => void;
}) {
  const confirm = useAction(async () => {
    await props.onConfirm();
    props.onClose();
  });
  return (
    <Dialog title={props.title} onClose={props.onClose}>
      <div class="stack">
        <div>{props.children}</div>
        {confirm.error && (
          <p role="alert" class="alert">
            {errorText(confirm.error)}
          </p>
        )}
        <div class="dialog-actions">
          <button type="button" class="button ghost" onClick={props.onClose}>
            {props.keep ?? 'Cancel'}
          </button>
          <button
            type="button"
            class={props.destructive === false ? 'button primary' : 'button danger'}
            disabled={confirm.pending}
            onClick={() => void confirm.run()}
          >
            {props.action}
          </button>
        </div>
      </div>
    </Dialog>
  );
}
