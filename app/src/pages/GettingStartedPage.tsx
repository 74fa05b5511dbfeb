import { ChecklistSteps } from '../modules/getting-started/Checklist.js';
import { useChecklist } from '../modules/getting-started/checklist.js';

/** Getting started: the new account's checklist (`/getting-started`), for admins. */
export function GettingStartedPage() {
  const checklist = useChecklist('page');
  if (!checklist.forMe) {
    return (
      <div class="getting-started-page">
        <h1 id="page-title">Getting started</h1>
        <p class="muted">
          An admin of the account sets it up. Your conversations are in the inbox.
        </p>
      </div>
    );
  }
  return (
    <div class="getting-started-page">
      <h1 id="page-title">Getting started</h1>
      <p class="muted" role="status">
        {checklist.loading
          ? 'Checking what is done…'
          : checklist.allDone
            ? 'Every step is done: the account is set up.'
            : `${checklist.doneCount} of ${checklist.steps.length} steps done.`}
      </p>
      <ChecklistSteps checklist={checklist} />
      <div class="form-actions">
        {checklist.dismissed ? (
          <>
            <span class="muted">Hidden from the inbox.</span>
            <button type="button" class="button" onClick={checklist.restore}>
              Show in the inbox
            </button>
          </>
        ) : (
          !checklist.allDone && (
            <button type="button" class="button" onClick={checklist.dismiss}>
              Dismiss
            </button>
          )
        )}
      </div>
    </div>
  );
}
