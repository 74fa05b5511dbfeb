import { initials } from '../lib/format.js';

const HUES = [210, 160, 280, 20, 340, 190, 45, 250];

/** A contact's initials on a calm colour picked from the name (decoration only). */
export function Avatar({ name, size = 'md' }: { name: string; size?: 'md' | 'lg' }) {
  let hash = 0;
  for (const ch of name) hash = (hash * 31 + ch.charCodeAt(0)) | 0;
  const hue = HUES[Math.abs(hash) % HUES.length]!;
  return (
    <span
      class={`avatar ${size}`}
      aria-hidden="true"
      style={{ background: `hsl(${hue} 55% 92%)`, color: `hsl(${hue} 45% 30%)` }}
    >
      {initials(name)}
    </span>
  );
}
