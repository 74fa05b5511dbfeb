import { useState } from 'preact/hooks';

/** A "Copy" button that puts `text` on the clipboard and says so (politely, for screen readers). */
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
