// The inbox's keyboard shortcuts: single keys, ignored while typing in a field.
import { useEffect } from 'preact/hooks';

export const SHORTCUTS: { keys: string; what: string }[] = [
  { keys: 'j', what: 'Next conversation' },
  { keys: 'k', what: 'Previous conversation' },
  { keys: 'r', what: 'Reply' },
  { keys: 'n', what: 'Write a private note' },
  { keys: 'e', what: 'Resolve the conversation' },
  { keys: '/', what: 'Search conversations' },
  { keys: '?', what: 'Show these shortcuts' },
  { keys: 'Enter', what: 'Send (in the composer); Shift+Enter for a new line' },
  { keys: 'Esc', what: 'Leave the composer or search; close a dialog or menu' },
];

function typingIn(target: EventTarget | null): boolean {
  const el = target as HTMLElement | null;
  if (!el) return false;
  return (
    el.isContentEditable ||
    el.tagName === 'INPUT' ||
    el.tagName === 'TEXTAREA' ||
    el.tagName === 'SELECT' ||
    el.closest('dialog[open], [role="menu"]') !== null
  );
}

export function useShortcuts(handlers: Record<string, () => void>): void {
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
      if (typingIn(e.target)) return;
      const handler = handlers[e.key];
      if (!handler) return;
      e.preventDefault();
      handler();
    };
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  });
}
