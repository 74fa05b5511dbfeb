import { describe, expect, it } from 'vitest';
import { broadcastSendJob } from '../../src/broadcasts/broadcast-send.job.js';
import type { BroadcastsService } from '../../src/broadcasts/broadcasts.service.js';
import type { ClaimKeeper } from '../../src/jobs/claim-keeper.js';
import type { ClaimedJob } from '../../src/jobs/job-runner.js';

// The unpaced send loop against a fake service whose batches are dispatched when the test says:
// how many batches are with the provider at once, and when the broadcast may finish.

interface Dispatch {
  batch: number;
  finish: () => void;
  fail: (err: Error) => void;
}

function fakeService(batches: number) {
  let queued = 0;
  const running = new Set<Dispatch>();
  const state = { maxRunning: 0, finishedWithRunning: -1, dispatches: [] as Dispatch[] };
  const service = {
    channelOf: async () => 'webchat',
    batchIntervalMs: () => 0,
    queueNextBatch: async (_accountId: string, _id: string, mayFinish: boolean) => {
      if (queued === batches) {
        if (!mayFinish) return 'drained';
        state.finishedWithRunning = running.size;
        return 'done';
      }
      const batch = ++queued;
      return {
        dispatch: () =>
          new Promise<void>((resolve, reject) => {
            const d: Dispatch = {
              batch,
              finish: () => {
                running.delete(d);
                resolve();
              },
              fail: (err) => {
                running.delete(d);
                reject(err);
              },
            };
            running.add(d);
            state.dispatches.push(d);
            state.maxRunning = Math.max(state.maxRunning, running.size);
          }),
      };
    },
  };
  return { service: service as unknown as BroadcastsService, state, running };
}

const job: ClaimedJob<'broadcast.send'> = {
  accountId: 'acc_1',
  id: 'job_1',
  kind: 'broadcast.send',
  payload: { v: 1, broadcast_id: 'bc_1' },
  attempts: 1,
  lease: new Date(),
};

/** Claims are the job runner's business; these runs keep none. */
const claims = { keep: () => () => Promise.resolve() } as unknown as ClaimKeeper;

/** Lets the loop run until it waits on dispatches again. */
const settle = () => new Promise<void>((resolve) => setTimeout(resolve, 5));

describe('the unpaced broadcast send loop', () => {
  it('keeps two batches with the provider while queueing the next, and finishes only once every dispatch has returned', async () => {
    const { service, state, running } = fakeService(6);
    const run = broadcastSendJob(service, claims).handle(job);
    for (let i = 0; i < 20 && state.finishedWithRunning < 0; i++) {
      await settle();
      expect(running.size).toBeLessThanOrEqual(2);
      // The oldest batch returns first, the rest stay with the provider a while.
      [...running][0]?.finish();
    }
    expect(await run).toEqual({ status: 'done' });
    expect(state.dispatches.map((d) => d.batch)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(state.maxRunning).toBe(2);
    expect(state.finishedWithRunning).toBe(0);
  });

  it('a failed dispatch fails the run, after the dispatches still running have returned', async () => {
    const { service, state, running } = fakeService(6);
    let ended = false;
    const run = broadcastSendJob(service, claims)
      .handle(job)
      .finally(() => (ended = true));
    await settle();
    expect(running.size).toBe(2);
    const [first, second] = state.dispatches;
    first!.fail(new Error('the database went away'));
    await settle();
    expect(ended).toBe(false); // the second batch is still with the provider
    second!.finish();
    await expect(run).rejects.toThrow('the database went away');
    expect(running.size).toBe(0);
    expect(state.finishedWithRunning).toBe(-1);
  });
});
