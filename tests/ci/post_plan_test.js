// Tests examples/ci/post-plan.js with a stand-in for the GitHub API client that keeps comments
// in memory and answers as GitHub does (a read-only token gets 403 on writes). Run by
// tests/ci_comment.rs: `node tests/ci/post_plan_test.js`.

'use strict';

const assert = require('assert');
const { postPlan, MARKER, LIMIT } = require('../../examples/ci/post-plan.js');

function fakeGitHub({ readOnly = false } = {}) {
  const comments = [];
  let next = 1;
  const denied = () => Object.assign(new Error('Resource not accessible by integration'), { status: 403 });
  const rest = {
    issues: {
      listComments: async ({ issue_number }) => ({ data: comments.filter((c) => c.issue_number === issue_number) }),
      createComment: async ({ issue_number, body }) => {
        if (readOnly) throw denied();
        comments.push({ id: next++, issue_number, body });
      },
      updateComment: async ({ comment_id, body }) => {
        if (readOnly) throw denied();
        comments.find((c) => c.id === comment_id).body = body;
      },
    },
  };
  const paginate = async (fn, args) => (await fn(args)).data;
  return { rest, paginate, comments };
}

function fakeCore() {
  const log = { warnings: [], summary: '' };
  return {
    log,
    warning: (m) => log.warnings.push(m),
    summary: { addRaw(t) { log.summary += t; return this; }, async write() {} },
  };
}

const context = { repo: { owner: 'colabhd', repo: 'devops' }, issue: { number: 7 } };

(async () => {
  // A first push creates the comment; the next push updates the same one.
  const gh = fakeGitHub();
  gh.comments.push({ id: 100, issue_number: 7, body: 'LGTM from a human' });
  assert.strictEqual(await postPlan({ github: gh, context, core: fakeCore(), body: 'Plan: 1 to update' }), 'created');
  assert.strictEqual(await postPlan({ github: gh, context, core: fakeCore(), body: 'Plan: 2 to update' }), 'updated');
  const mine = gh.comments.filter((c) => c.body.startsWith(MARKER));
  assert.strictEqual(mine.length, 1, 'one comment per pull request');
  assert.ok(mine[0].body.endsWith('Plan: 2 to update'), mine[0].body);
  assert.strictEqual(gh.comments.find((c) => c.id === 100).body, 'LGTM from a human', 'other comments untouched');

  // Another pull request gets its own comment.
  await postPlan({ github: gh, context: { ...context, issue: { number: 8 } }, core: fakeCore(), body: 'x' });
  assert.strictEqual(gh.comments.filter((c) => c.body.startsWith(MARKER)).length, 2);

  // A fork's read-only token: the plan goes to the job summary, with a warning.
  const fork = fakeGitHub({ readOnly: true });
  const core = fakeCore();
  assert.strictEqual(await postPlan({ github: fork, context, core, body: 'Plan: 1 to create' }), 'summary');
  assert.strictEqual(core.log.summary, 'Plan: 1 to create');
  assert.ok(core.log.warnings[0].includes('fork'));

  // Any other failure fails the step.
  const broken = fakeGitHub();
  broken.rest.issues.createComment = async () => { throw Object.assign(new Error('boom'), { status: 500 }); };
  await assert.rejects(postPlan({ github: broken, context, core: fakeCore(), body: 'x' }), /boom/);

  // A plan longer than a comment may be is cut, saying so.
  const big = fakeGitHub();
  await postPlan({ github: big, context, core: fakeCore(), body: 'x'.repeat(100000) });
  assert.ok(big.comments[0].body.length <= LIMIT + MARKER.length + 1, 'fits');
  assert.ok(big.comments[0].body.includes('cut to fit'));
  console.log('post-plan: all cases pass');
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
