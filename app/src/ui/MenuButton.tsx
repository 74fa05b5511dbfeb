import { useEffect, useId, useRef, useState } from 'preact/hooks';

export interface MenuItem {
  label: string;
  onSelect: () => void;
  group?: string;
}

/**
 * A button that opens a menu (WAI-ARIA menu button): arrows move, Enter or Space choose,
 * Escape closes and gives focus back, a click outside closes.
 */
export function MenuButton(props: { label: string; items: MenuItem[]; class?: string }) {
  const [open, setOpen] = useState(false);
  const buttonRef = useRef<HTMLButtonElement>(null);
  const menuRef = useRef<HTMLDivElement>(null);
  const id = useId();

  const items = () => [
    ...(menuRef.current?.querySelectorAll<HTMLElement>('[role="menuitem"]') ?? []),
  ];
  useEffect(() => {
    if (!open) return;
    items()[0]?.focus();
    const outside = (e: MouseEvent) => {
      if (!menuRef.current?.contains(e.target as Node) && e.target !== buttonRef.current)
        setOpen(false);
    };
    document.addEventListener('mousedown', outside);
    return () => document.removeEventListener('mousedown', outside);
  }, [open]);

  const close = () => {
    setOpen(false);
    buttonRef.current?.focus();
  };
  const onKeyDown = (e: KeyboardEvent) => {
    const all = items();
    const at = all.indexOf(document.activeElement as HTMLElement);
    const move = (i: number) => all[(i + all.length) % all.length]?.focus();
    if (e.key === 'ArrowDown') move(at + 1);
    else if (e.key === 'ArrowUp') move(at - 1);
    else if (e.key === 'Home') move(0);
    else if (e.key === 'End') move(all.length - 1);
    else if (e.key === 'Escape' || e.key === 'Tab') close();
    else return;
    if (e.key !== 'Tab') e.preventDefault();
    e.stopPropagation();
  };

  let lastGroup: string | undefined;
  return (
    <div class="menu-wrap">
      <button
        ref={buttonRef}
        type="button"
        class={props.class ?? 'button'}
        aria-haspopup="menu"
        aria-expanded={open}
        aria-controls={open ? id : undefined}
        onClick={() => setOpen(!open)}
        onKeyDown={(e) => {
          if (e.key === 'ArrowDown') {
            e.preventDefault();
            setOpen(true);
          }
        }}
      >
        {props.label}
      </button>
      {open && (
        <div
          class="menu"
          role="menu"
          id={id}
          aria-label={props.label}
          ref={menuRef}
          onKeyDown={onKeyDown}
        >
          {props.items.map((item, i) => {
            const heading = item.group !== lastGroup ? item.group : undefined;
            lastGroup = item.group;
            return (
              <>
                {heading && (
                  <div class="menu-group" role="presentation">
                    {heading}
                  </div>
                )}
                <button
                  key={i}
                  type="button"
                  role="menuitem"
                  tabIndex={-1}
                  onClick={() => {
                    close();
                    item.onSelect();
                  }}
                >
                  {item.label}
                </button>
              </>
            );
          })}
        </div>
      )}
    </div>
  );
}
