import type { ComponentChildren } from 'preact';
import { useId } from 'preact/hooks';
import { cloneElement, type VNode } from 'preact';

export function AuthCard(props: {
  title: string;
  error: string | null;
  children: ComponentChildren;
}) {
  return (
    <main class="auth">
      <div class="auth-card">
        <p class="brand" aria-hidden="true">
          <span class="brand-mark" /> Switchboard
        </p>
        <h1>{props.title}</h1>
        <div role="alert" class={props.error ? 'alert' : 'alert empty'}>
          {props.error}
        </div>
        {props.children}
      </div>
    </main>
  );
}

/** A labelled field: the label names the control, the hint describes it. */
export function Field(props: { label: string; hint?: string; children: VNode }) {
  const id = useId();
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      {cloneElement(props.children, {
        id,
        ...(props.hint ? { 'aria-describedby': `${id}-hint` } : {}),
      })}
      {props.hint && (
        <p class="hint" id={`${id}-hint`}>
          {props.hint}
        </p>
      )}
    </div>
  );
}
