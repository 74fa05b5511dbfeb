import type { ComponentChildren } from 'preact';
import { useId, useState } from 'preact/hooks';
import './ui.css';

/** A button that puts `text` on the clipboard and says so (a status, for screen readers too). */
export function CopyButton(props: { text: string; label?: string }) {
  const [said, setSaid] = useState('');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(props.text);
      setSaid('Copied');
    } catch {
      setSaid('Could not copy: select the text and copy it');
    }
  };
  return (
    <span class="copy">
      <button type="button" class="button ghost small" onClick={() => void copy()}>
        {props.label ?? 'Copy'}
      </button>
      <span role="status" class="hint">
        {said}
      </span>
    </span>
  );
}

/**
 * A read-only value to copy (a secret shown once, an invite link, a snippet), selected on
 * focus, with its own button named after it ("Copy verify token").
 */
export function CopyField(props: {
  label: string;
  value: string;
  multiline?: boolean;
  hint?: ComponentChildren;
}) {
  const id = useId();
  const select = (e: { currentTarget: HTMLInputElement | HTMLTextAreaElement }) =>
    e.currentTarget.select();
  return (
    <div class="copy-field">
      <div class="field">
        <label for={id}>{props.label}</label>
        {props.multiline ? (
          <textarea id={id} readOnly rows={2} class="mono" value={props.value} onFocus={select} />
        ) : (
          <input id={id} type="text" readOnly class="mono" value={props.value} onFocus={select} />
        )}
        {props.hint && <p class="hint">{props.hint}</p>}
      </div>
      <CopyButton text={props.value} label={`Copy ${props.label.toLowerCase()}`} />
    </div>
  );
}
