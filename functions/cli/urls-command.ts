import { Command, Option } from 'commander';
import { desiredRedirectSettings, type PostbackMethod } from '../marketplace/redirect-settings';
import { buildSurveyUrls } from '../receiving/survey-urls';
import { cliContext } from './context';
import { methodOfVariable, methodOption, surveyIdOption } from './options';
import { complain, say, sayJson } from './terminal';

/** `urls --survey <id>`: the seven signed URLs of a survey, placeholders left in. */
export function urlsCommand(): Command {
  return new Command('urls')
    .description("print a survey's five redirect and two postback URLs, signed with the current key")
    .requiredOption('--survey <id>', 'survey id', surveyIdOption)
    .option('--base-url <url>', 'public base URL of the receiver (default: PUBLIC_BASE_URL)')
    .option(
      '--postback-base-url <url>',
      'base URL of the postbacks (default: POSTBACK_BASE_URL, else the redirects base URL)',
    )
    .option('--json', 'print the nine setRedirectionForSurvey fields as JSON')
    .addOption(
      new Option(
        '--success-method <method>',
        'success postback method, for --json (default: POSTBACK_METHOD_SUCCESS, else GET)',
      ).argParser(methodOption),
    )
    .addOption(
      new Option(
        '--fail-method <method>',
        'fail postback method, for --json (default: POSTBACK_METHOD_FAIL, else GET)',
      ).argParser(methodOption),
    )
    .action(
      async (options: {
        survey: string;
        baseUrl?: string;
        postbackBaseUrl?: string;
        json?: boolean;
        successMethod?: PostbackMethod;
        failMethod?: PostbackMethod;
      }) => {
        const context = cliContext();
        // Any id can be signed (a survey configured by hand, before its registration), but one not registered here is
        // said so: its hits are recorded, while reconciliation, the health check and finance cover registered surveys.
        if (!(await context.registry.get(options.survey)))
          complain(
            `survey ${options.survey} is not registered here: its hits will be recorded, but only registered surveys are reconciled, watched and reported (npm run cli -- redirects apply --survey ${options.survey} registers it and points it here); check the id`,
          );
        const urls = buildSurveyUrls(
          options.baseUrl ?? context.publicBaseUrl,
          options.survey,
          await context.keyRing(),
          // Locally the postbacks go where the redirects do; against AWS they have a host of their own, and one
          // built on --base-url would point the survey's postbacks at the public host (refused as without it).
          options.postbackBaseUrl ??
            (options.baseUrl !== undefined && !process.env.POSTBACK_BASE_URL && context.target === 'local'
              ? options.baseUrl
              : context.postbackBaseUrl),
        );
        if (options.json) {
          // All nine fields setRedirectionForSurvey takes: the seven URLs and the postback methods.
          sayJson(
            desiredRedirectSettings(urls, {
              success: options.successMethod ?? methodOfVariable('POSTBACK_METHOD_SUCCESS'),
              fail: options.failMethod ?? methodOfVariable('POSTBACK_METHOD_FAIL'),
            }),
          );
          return;
        }
        const width = Math.max(...Object.keys(urls).map((field) => field.length));
        for (const [field, url] of Object.entries(urls)) say(`${field.padEnd(width)}  ${url}`);
      },
    );
}
