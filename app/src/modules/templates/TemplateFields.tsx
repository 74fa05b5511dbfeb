import type { Template } from '../../api/types.js';
import { placeholderCount, renderPreview } from '../../lib/template-body.js';

/**
 * An approved template to send: the choice among `templates`, a field per numbered parameter
 * ({{1}}…) and the body as it will read. The owner keeps the state (the conversation's template
 * dialog, a new broadcast); picking another template clears the parameters.
 */
export function TemplateFields(props: {
  templates: Template[];
  template: Template | undefined;
  params: string[];
  onTemplate: (name: string) => void;
  onParams: (params: string[]) => void;
}) {
  const { template, params } = props;
  const count = template ? placeholderCount(template.body) : 0;
  return (
    <>
      <label class="field">
        <span>Template</span>
        <select
          value={template?.name}
          onChange={(e) => {
            props.onTemplate(e.currentTarget.value);
            props.onParams([]);
          }}
        >
          {props.templates.map((t) => (
            <option key={t.id} value={t.name}>
              {t.name} ({t.language})
            </option>
          ))}
        </select>
      </label>
      {Array.from({ length: count }, (_, i) => (
        <label class="field" key={`${template?.name}-${i}`}>
          <span>{`Parameter {{${i + 1}}}`}</span>
          <input
            required
            value={params[i] ?? ''}
            onInput={(e) => {
              const next = [...params];
              next[i] = e.currentTarget.value;
              props.onParams(next);
            }}
          />
        </label>
      ))}
      <div>
        <p class="label">Preview</p>
        <p class="preview" aria-label="Preview">
          {template ? renderPreview(template.body, params) : ''}
        </p>
      </div>
    </>
  );
}
