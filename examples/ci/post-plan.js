// Posts fabric's plan on a pull request as one comment, updated in place on every push (as
// Atlantis does), for actions/github-script. Copy next to the workflow
// (.github/workflows/fabric-post-plan.js) and call it from the workflow's last step.
//
// A pull request from a fork runs with a read-only token: it cannot comment. The plan then goes
// to the job's summary instead, and the step still succeeds (the plan itself did).
//
// Tested outside GitHub by tests/ci/post_plan_test.js with a stand-in for the API client.

'use strict';

// The hidden line that marks fabric's comment, so a push finds and updates it.
const MARKER = '<!-- fabric-plan -->';

// GitHub refuses comments over 65536 characters.
const LIMIT = 65000;

function shorten(body) {
  if (body.length <= LIMIT) return body;
  const note = '\n\n_The plan was cut to fit a comment: run `fabric plan` for all of it._\n';
  return body.slice(0, LIMIT - note.length) + note;
}

// Creates or updates the comment; returns what it did: 'created', 'updated' or 'summary'.
async function postPlan({ github, context, core, body }) {
  const text = `${MARKER}\n${shorten(body)}`;
  const where = { owner: context.repo.owner, repo: context.repo.repo };
  const issue_number = context.issue.number;
  try {
    const comments = await github.paginate(github.rest.issues.listComments, { ...where, issue_number, per_page: 100 });
    const mine = comments.find((c) => typeof c.body === 'string' && c.body.startsWith(MARKER));
    if (mine) {
      await github.rest.issues.updateComment({ ...where, comment_id: mine.id, body: text });
      return 'updated';
    }
    await github.rest.issues.createComment({ ...where, issue_number, body: text });
    return 'created';
  } catch (e) {
    // 403: a fork's token may read but not write. Anything else is a real failure.
    if (e && e.status === 403) {
      core.warning('this token cannot comment (a pull request from a fork?): the plan is in the job summary');
      await core.summary.addRaw(body).write();
      return 'summary';
    }
    throw e;
  }
}

module.exports = { postPlan, MARKER, LIMIT };
