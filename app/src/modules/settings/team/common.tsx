// Pieces the people, keys, templates and account screens share: a secret shown once with a
// copy button, a confirmation before what cannot be undone, and the API's refusal in words.
import type { ComponentChildren } from 'preact';
import { useId, useRef, useState } from 'preact/hooks';
import { ApiError } from '../../../api/client.js';
import { Dialog } from '../../../ui/Dialog.js';
import './settings-screens.css';

/** What a refusal says, for a `role="alert"` (the API's message, else a generic line). */
export function errorText(err: unknown, fallback = 'Something went wrong. Try again.'): string {
  if (err instanceof ApiError) {
    const details = (err.body as { error?: { details?: { field: string; issue: string }[] } })
      ?.error?.details;
    if (details && details.length > 0)
      return details.map((d) => `${d.field.replace(/^body\.?/, '')}: ${d.issue}`).join('; ');
    return err.message;
  }
  return err instanceof Error ? err.message : fallback;
}

/** A value to copy (a secret shown once, an invite link): read-only, selected on focus. */
export function CopyField(props: { label: string; value: string; hint?: ComponentChildren }) {
  const id = useId();
  const input = useRef<HTMLInputElement>(null);
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(props.value);
    } catch {
      // No clipboard permission: select the text so that Ctrl+C copies it.
      input.current?.select();
      document.execCommand('copy');
    }
    setCopied(true);
  };
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      <div class="copy-row">
        <input
          ref={input}
          id={id}
          class="mono"
          readOnly
          value={props.value}
          onFocus={(e) => e.currentTarget.select()}
        />
        <button type="button" class="button" onClick={() => void copy()}>
          Copy
        </button>
      </div>
      <p class="hint" role="status">
        {copied ? 'Copied to the clipboard.' : props.hint}
      </p>
    </div>
  );
}

/** "Are you sure?" for what cannot be undone: the action's button names the action. */
export function ConfirmDialog(props: {
  title: string;
  action: string;
  children: ComponentChildren;
  onConfirm: () => Promise<void>;
  onClose: () => void;
}) {
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const confirm = async () => {
    setPending(true);
    setError(null);
    try {
      await props.onConfirm();
      props.onClose();
    } catch (err) {
      setError(errorText(err));
      setPending(false);
    }
  };
  return (
    <Dialog title={props.title} onClose={props.onClose}>
      <div class="stack">
        <div>{props.children}</div>
        {error && (
          <p role="alert" class="alert">
            {error}
          </p>
        )}
        <div class="dialog-actions">
          <button type="button" class="button ghost" onClick={props.onClose}>
            Cancel
          </button>
          <button
            type="button"
            class="button danger"
            disabled={pending}
            onClick={() => void confirm()}
          >
            {props.action}
          </button>
        </div>
      </div>
    </Dialog>
  );
}

/** A date and time as the reader's locale writes it. */
export function when(iso: string): string {
  return new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}
