import { useEffect, useId, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { api, data } from '../../api/client.js';
import { keys } from '../../api/keys.js';
import type { CannedResponse, Conversation } from '../../api/types.js';
import { windowOpen } from '../../lib/format.js';
import { useQuery } from '../../lib/query.js';
import { addNote, sendMessage, sendPresence, upload } from './conversation-data.js';
import { TemplateDialog } from './TemplateDialog.js';

export type ComposerMode = 'reply' | 'note';

/** The `/word` a line starts with, up to the caret: what to look canned responses up by. */
function cannedQuery(text: string, caret: number): { start: number; q: string } | null {
  const lineStart = text.lastIndexOf('\n', caret - 1) + 1;
  const match = /^\/([a-z0-9_-]{0,32})$/.exec(text.slice(lineStart, caret));
  return match ? { start: lineStart, q: match[1]! } : null;
}

export function Composer(props: {
  conversation: Conversation;
  mode: ComposerMode;
  onMode: (mode: ComposerMode) => void;
  focusKey: number;
}) {
  const { conversation, mode } = props;
  const [text, setText] = useState('');
  const [caret, setCaret] = useState(0);
  const [file, setFile] = useState<File | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [sending, setSending] = useState(false);
  const [active, setActive] = useState(0);
  const [templateOpen, setTemplateOpen] = useState(false);
  const [dismissed, setDismissed] = useState<number | null>(null);
  const textRef = useRef<HTMLTextAreaElement>(null);
  const fileRef = useRef<HTMLInputElement>(null);
  const lastTyping = useRef(0);
  // Where the caret goes once the text an insert made is in the textarea.
  const pendingCaret = useRef<number | null>(null);
  const listId = useId();
  const canReply = windowOpen(conversation);

  useEffect(() => {
    if (props.focusKey > 0) textRef.current?.focus();
  }, [props.focusKey]);
  // In the render that put the inserted text in, before the next key is handled: a caret set a
  // frame later (requestAnimationFrame) could land after keys typed meanwhile, and move them.
  useLayoutEffect(() => {
    const at = pendingCaret.current;
    if (at === null) return;
    pendingCaret.current = null;
    textRef.current?.setSelectionRange(at, at);
  });

  const slash = cannedQuery(text, caret);
  const cannedOpen = slash !== null && dismissed !== slash.start;
  const canned = useQuery<CannedResponse[]>({
    queryKey: keys.canned(slash?.q ?? ''),
    queryFn: async ({ signal }) =>
      (
        await data(
          api.GET('/v1/canned-responses', {
            params: { query: { limit: 20, ...(slash?.q ? { q: slash.q } : {}) } },
            signal,
          }),
        )
      ).data,
    enabled: cannedOpen,
  });
  const options = cannedOpen ? (canned.data ?? []) : [];
  const activeIndex = Math.min(active, Math.max(options.length - 1, 0));

  const insert = (response: CannedResponse) => {
    if (!slash) return;
    const next = text.slice(0, slash.start) + response.content + text.slice(caret);
    const at = slash.start + response.content.length;
    pendingCaret.current = at;
    setText(next);
    setCaret(at);
  };

  const submit = async () => {
    const content = text.trim();
    if (sending || (!content && !file)) return;
    setSending(true);
    setError(null);
    try {
      if (mode === 'note') {
        await addNote(conversation.id, content);
      } else if (file) {
        const media = await upload(file);
        const type = media.content_type.startsWith('image/') ? 'image' : 'document';
        await sendMessage(conversation, {
          type,
          media_id: media.id,
          ...(content ? { content } : {}),
        });
      } else {
        await sendMessage(conversation, { type: 'text', content });
      }
      setText('');
      setFile(null);
    } catch (err) {
      setError(err instanceof Error ? err.message : 'It could not be sent.');
    } finally {
      setSending(false);
    }
  };

  const onKeyDown = (e: KeyboardEvent) => {
    if (options.length > 0) {
      if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
        e.preventDefault();
        const step = e.key === 'ArrowDown' ? 1 : -1;
        setActive((activeIndex + step + options.length) % options.length);
        return;
      }
      if (e.key === 'Enter' || e.key === 'Tab') {
        e.preventDefault();
        insert(options[activeIndex]!);
        return;
      }
      if (e.key === 'Escape') {
        e.preventDefault();
        setDismissed(slash!.start);
        return;
      }
    }
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      void submit();
    } else if (e.key === 'Escape') {
      textRef.current?.blur();
    }
  };

  const onInput = (e: Event) => {
    const el = e.currentTarget as HTMLTextAreaElement;
    setText(el.value);
    setCaret(el.selectionStart);
    setActive(0);
    if (mode === 'reply' && Date.now() - lastTyping.current > 10_000) {
      lastTyping.current = Date.now();
      sendPresence(conversation.id, 'typing');
    }
  };

  const label = mode === 'note' ? 'Note' : 'Reply';
  const closed = mode === 'reply' && !canReply;
  return (
    <div class={`composer ${mode}`}>
      <div class="composer-tabs">
        <button
          type="button"
          class="toggle"
          aria-pressed={mode === 'note'}
          onClick={() => props.onMode(mode === 'note' ? 'reply' : 'note')}
        >
          Private note
        </button>
        {mode === 'note' && <span class="hint">Only your team sees notes.</span>}
      </div>
      {closed ? (
        <div class="window-closed">
          <p>
            The 24-hour window is closed: the contact has not written in the last 24 hours, so only
            an approved template can be sent.
          </p>
          <button type="button" class="button primary" onClick={() => setTemplateOpen(true)}>
            Send template
          </button>
        </div>
      ) : (
        <>
          {error && (
            <p class="composer-error" role="alert">
              {error}
            </p>
          )}
          {options.length > 0 && (
            <ul class="canned" role="listbox" id={listId} aria-label="Canned responses">
              {options.map((o, i) => (
                <li
                  key={o.id}
                  id={`${listId}-${i}`}
                  role="option"
                  aria-selected={i === activeIndex}
                  onMouseDown={(e) => {
                    e.preventDefault();
                    insert(o);
                  }}
                >
                  <strong>/{o.shortcut}</strong> <span>{o.content}</span>
                </li>
              ))}
            </ul>
          )}
          {file && (
            <p class="attachment">
              📎 {file.name}{' '}
              <button type="button" class="link-button" onClick={() => setFile(null)}>
                Remove attachment
              </button>
            </p>
          )}
          <textarea
            ref={textRef}
            aria-label={label}
            placeholder={
              mode === 'note'
                ? 'Write a note for your team'
                : 'Write a reply. Enter sends, Shift+Enter for a new line, / for canned responses'
            }
            rows={3}
            value={text}
            onInput={onInput}
            onKeyDown={onKeyDown}
            onClick={(e) => setCaret(e.currentTarget.selectionStart)}
            onKeyUp={(e) => setCaret(e.currentTarget.selectionStart)}
            aria-controls={options.length > 0 ? listId : undefined}
            aria-activedescendant={options.length > 0 ? `${listId}-${activeIndex}` : undefined}
            data-composer
          />
          <div class="composer-actions">
            {mode === 'reply' && (
              <>
                <input
                  ref={fileRef}
                  type="file"
                  class="visually-hidden"
                  tabIndex={-1}
                  aria-hidden="true"
                  accept="image/jpeg,image/png,image/webp,application/pdf,.doc,.docx,.xls,.xlsx,.ppt,.pptx"
                  onChange={(e) => {
                    setFile(e.currentTarget.files?.[0] ?? null);
                    e.currentTarget.value = '';
                  }}
                />
                <button type="button" class="button ghost" onClick={() => fileRef.current?.click()}>
                  Attach file
                </button>
              </>
            )}
            <span class="spacer" />
            <button
              type="button"
              class="button primary"
              disabled={sending}
              onClick={() => void submit()}
            >
              Send
            </button>
          </div>
        </>
      )}
      {templateOpen && (
        <TemplateDialog conversation={conversation} onClose={() => setTemplateOpen(false)} />
      )}
    </div>
  );
}
