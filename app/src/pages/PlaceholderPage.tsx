/** A screen not built yet: a real page that says so. */
export function ComingSoon({ title }: { title: string }) {
  return (
    <div class="placeholder">
      <h1 id="page-title">{title}</h1>
      <p class="muted">
        Coming soon. The API has it today: <a href="/docs">read the API reference</a>.
      </p>
    </div>
  );
}
