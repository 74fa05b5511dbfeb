/**
 * The widget as a visitor will see it, drawn by the app itself from the form's values as they
 * are typed. The real widget is not loaded here: the app's CSP allows only its own scripts, and
 * the widget would need this page to be an allowed origin and would open a visitor
 * conversation. The preview follows the widget's look (header in the colour, the greeting, the
 * message box) and holds no controls, so nothing in it can be focused or mistaken for the app's.
 */
export function WidgetPreview(props: { title: string; greeting: string; color: string }) {
  return (
    <figure class="widget-preview">
      <figcaption class="label">Preview</figcaption>
      <div class="wp-frame" style={{ '--wp-color': props.color }}>
        <div class="wp-head">{props.title}</div>
        <div class="wp-body">
          {props.greeting && <div class="wp-bubble">{props.greeting}</div>}
          <div class="wp-bubble wp-mine">Hi! Do you ship abroad?</div>
        </div>
        <div class="wp-composer">
          <span class="wp-input">Message</span>
          <span class="wp-send">Send</span>
        </div>
      </div>
      <div class="wp-launcher" style={{ '--wp-color': props.color }} aria-hidden="true">
        ●
      </div>
    </figure>
  );
}
