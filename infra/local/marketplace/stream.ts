/**
 * A gentle stream of simulated respondents for `npm start`, so a newcomer sees outcomes arrive.
 */
import type { LocalMarketplace } from './server';

export interface StreamProgress {
  respondents: number;
  completes: number;
  redirectsSent: number;
  postbacksSent: number;
  failures: number;
}

export function startRespondentStream(
  marketplace: LocalMarketplace,
  intervalMs: number,
  onProgress: (progress: StreamProgress) => void,
): () => Promise<void> {
  const progress: StreamProgress = {
    respondents: 0,
    completes: 0,
    redirectsSent: 0,
    postbacksSent: 0,
    failures: 0,
  };
  const timer = setInterval(() => {
    const live = [...marketplace.state.surveys.values()].filter((survey) => survey.live);
    const survey = live[marketplace.state.random.between(0, live.length - 1)];
    if (!survey) return;
    marketplace.respondents
      .start({ surveyId: survey.surveyId })
      .then((attempt) => {
        progress.respondents++;
        if (attempt.transaction.status === 'Completed') progress.completes++;
        if (attempt.redirect) progress.redirectsSent++;
        progress.postbacksSent += attempt.postbacks.length;
        progress.failures += [attempt.redirect?.status, ...attempt.postbacks.map((p) => p.status)].filter(
          (status) => status !== undefined && status >= 500,
        ).length;
        onProgress(progress);
      })
      .catch(() => {
        progress.failures++;
        onProgress(progress);
      });
  }, intervalMs);
  return async () => {
    clearInterval(timer);
    await marketplace.respondents.settle();
  };
}
