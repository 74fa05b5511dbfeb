/**
 * The widget's styles, inside its shadow root: the host page's CSS cannot reach them. The host
 * element itself is in the page, where rules like `div { display: none !important }` or
 * `body > * { transform: … }` could reach it; `!important` declarations of a shadow root's
 * `:host` win over the page's own `!important` ones, so the host resets everything and places
 * itself.
 *
 * Colours: `--on-accent` is white or near-black, whichever contrasts more with the accent (set
 * from the settings' colour); no text is drawn with reduced opacity, so the default colours
 * reach WCAG AA (4.5:1) for every text, timestamps included.
 */
export const STYLES = `
:host {
  all: initial !important; display: block !important; position: fixed !important;
  right: 20px !important; bottom: 20px !important; z-index: 2147483000 !important;
}
* { box-sizing: border-box; }
.root {
  --accent: #2563eb; --on-accent: #fff;
  font: 15px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #111827;
}
button { font: inherit; cursor: pointer; }
.launcher {
  width: 56px; height: 56px; border-radius: 50%; border: 0; background: var(--accent);
  color: var(--on-accent); box-shadow: 0 4px 14px rgba(0,0,0,.25); display: grid; place-items: center;
}
.launcher svg { width: 28px; height: 28px; fill: currentColor; }
.launcher:focus-visible, button:focus-visible, textarea:focus-visible, a:focus-visible, .log:focus-visible {
  outline: 3px solid #f59e0b; outline-offset: 2px;
}
.panel {
  position: absolute; right: 0; bottom: 72px; width: 370px; height: min(560px, calc(100vh - 120px));
  background: #fff; border-radius: 14px; box-shadow: 0 10px 40px rgba(0,0,0,.25);
  display: flex; flex-direction: column; overflow: hidden;
}
.panel[hidden] { display: none; }
header {
  background: var(--accent); color: var(--on-accent); padding: 6px 6px 6px 16px; display: flex;
  align-items: center; justify-content: space-between; gap: 8px;
}
header h2 { margin: 0; font-size: 16px; font-weight: 600; display: inline; }
.close {
  background: transparent; border: 0; color: inherit; font-size: 26px; line-height: 1;
  min-width: 44px; min-height: 44px; border-radius: 8px;
}
.status { font-size: 13px; }
.log { flex: 1; overflow-y: auto; padding: 14px; background: #f9fafb; }
.greeting { margin: 0 0 12px; padding: 10px 12px; background: #fff; border: 1px solid #e5e7eb; border-radius: 12px; }
ul { list-style: none; margin: 0; padding: 0; display: flex; flex-direction: column; gap: 8px; }
li { max-width: 80%; padding: 8px 12px; border-radius: 14px; white-space: pre-wrap; overflow-wrap: anywhere; }
li.team { align-self: flex-start; background: #fff; border: 1px solid #e5e7eb; }
li.visitor { align-self: flex-end; background: var(--accent); color: var(--on-accent); }
li.failed { background: #fee2e2; color: #7f1d1d; }
.meta { display: block; font-size: 12px; margin-top: 2px; }
li.team .meta { color: #4b5563; }
.retry { margin-left: 6px; background: #fff; color: #7f1d1d; border: 1px solid #7f1d1d; border-radius: 6px; font-size: 13px; padding: 2px 8px; }
li a { color: inherit; }
li img { display: block; max-width: 100%; max-height: 240px; border-radius: 8px; margin-bottom: 4px; }
.attachment { display: block; font-style: italic; }
form { display: flex; gap: 8px; padding: 10px; border-top: 1px solid #e5e7eb; background: #fff; }
textarea {
  flex: 1; resize: none; font: inherit; padding: 8px 10px; border: 1px solid #6b7280;
  border-radius: 10px; height: 42px; max-height: 120px; color: #111827; background: #fff;
}
textarea::placeholder { color: #6b7280; }
.send { border: 0; border-radius: 10px; padding: 0 16px; background: var(--accent); color: var(--on-accent); font-weight: 600; }
.send:disabled, textarea:disabled { opacity: .5; cursor: not-allowed; }
.notice { margin: 0; padding: 8px 14px; font-size: 13px; background: #fef3c7; color: #78350f; }
.notice[hidden] { display: none; }
@media (max-width: 480px) {
  :host { right: 12px !important; bottom: 12px !important; }
  .panel { position: fixed; inset: 0; width: auto; height: auto; border-radius: 0; bottom: 0; }
  .root.open .launcher { display: none; }
}
`;
