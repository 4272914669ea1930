/**
 * Supplier API, reference data: the question and answer library, term reason categories and the mapping
 * metadata. Fixed answers in the reference's shapes; nothing here depends on the simulated state.
 */
import { type Endpoint, ok } from './answers';

export function lookupEndpoints(): Endpoint[] {
  return [
    {
      method: 'GET',
      pattern: /^\/supply\/getQuestionsByCategory\/([^/]+)(?:\/([^/]+))?$/,
      name: 'getQuestionsByCategory',
      answer: (r) => {
        return ok({
          msg: 'Questions',
          result: [
            {
              QuestionId: 42,
              QuestionText: 'What is your age?',
              QuestionKey: 'AGE',
              QuestionType: 'Numeric Open Ended',
              language: r.match[2] ?? 'ENGLISH',
              Category: ['Demographic'],
            },
            {
              QuestionId: 43,
              QuestionText: 'What is your gender?',
              QuestionKey: 'GENDER',
              QuestionType: 'Single Punch',
              language: r.match[2] ?? 'ENGLISH',
              Category: ['Demographic'],
            },
          ],
        });
      },
    },
    {
      method: 'GET',
      pattern: /^\/supply\/getAnswersByQuesKey\/([^/]+)$/,
      name: 'getAnswersByQuesKey',
      answer: () => {
        return ok({
          msg: 'Answers',
          result: {
            QuestionId: 43,
            QuestionText: 'What is your gender?',
            QuestionType: 'Single Punch',
            QuestionOptions: [
              { OptionText: 'Male', id: 1, Order: 1 },
              { OptionText: 'Female', id: 2, Order: 2 },
            ],
          },
        });
      },
    },
    {
      method: 'GET',
      pattern: /^\/resources\/termReasonCategories\/([^/]+)$/,
      name: 'termReasonCategories',
      answer: (r) => {
        return ok({
          msg: 'Term reasons',
          result: [
            {
              name: 'ClientQuotaFull',
              code: Number(r.match[1]) || 1005,
              desc: 'Qualifying quota already met',
              infoUrl: '',
            },
          ],
        });
      },
    },
    {
      method: 'GET',
      pattern: /^\/mapping\/metadata\/?$/,
      name: 'metadata',
      answer: () => {
        return ok({
          msg: 'Metadata',
          result: {
            countries: [{ name: 'United States', code: 1 }],
            languages: [{ name: 'ENGLISH', code: 1 }],
            categories: ['Other'],
            jobTypes: ['Consumer'],
            questionTypes: ['Single Punch', 'Numeric Open Ended'],
            groupTypes: ['Consumer', 'B2B'],
            deviceType: ['All'],
            surveyStatus: {
              PreSurveyDNC: 1,
              Completed: 2,
              Failed: 3,
              OverQuota: 4,
              QualityTermination: 5,
              PreSurveyTermination: 6,
              StartSurveyDNC: 7,
              PreSurveyOverQuota: 8,
              PreSurveyQualityTermination: 9,
            },
            dmaMapping: [{ OptionId: 1, DMA_NAME: 'New York', DMA_CODE: 501 }],
          },
        });
      },
    },
  ];
}
