// The login page.

import { ApiError, post, setCsrfToken, type LoginAnswer } from './api';
import { h, icon } from './dom';

// Draw the login form into root; onDone runs after a successful login.
export function loginView(root: HTMLElement, notice: string | null, onDone: () => void): void {
  const user = h('input', {
    id: 'login-user',
    class: 'input',
    name: 'username',
    type: 'text',
    autocomplete: 'username',
    required: true,
    attrs: { autocapitalize: 'none', spellcheck: 'false' },
  });
  const pass = h('input', {
    id: 'login-password',
    class: 'input',
    name: 'password',
    type: 'password',
    autocomplete: 'current-password',
    required: true,
  });
  const error = h('p', { class: 'form-error', id: 'login-error', role: 'alert' });
  const submit = h('button', { class: 'btn btn-primary btn-block', type: 'submit', text: 'Sign in' });
  const form = h(
    'form',
    { class: 'login-form', id: 'login-form', attrs: { 'aria-describedby': 'login-error' } },
    h('div', { class: 'field' }, h('label', { class: 'label', for: 'login-user', text: 'User name' }), user),
    h('div', { class: 'field' }, h('label', { class: 'label', for: 'login-password', text: 'Password' }), pass),
    error,
    submit,
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    error.textContent = '';
    submit.disabled = true;
    submit.textContent = 'Signing in…';
    post<LoginAnswer>('/api/login', { username: user.value, password: pass.value })
      .then((r) => {
        setCsrfToken(r.csrf_token);
        onDone();
      })
      .catch((e: unknown) => {
        error.textContent = e instanceof ApiError ? e.describe() : 'Sign-in failed.';
        submit.disabled = false;
        submit.textContent = 'Sign in';
        pass.select();
        pass.focus();
      });
  });

  root.replaceChildren(
    h(
      'main',
      { class: 'login-page' },
      h(
        'div',
        { class: 'login-card' },
        h('div', { class: 'brand brand-large' }, h('span', { class: 'brand-mark', attrs: { 'aria-hidden': 'true' } }, 'h'), h('span', { text: 'hostgate' })),
        h('h1', { class: 'login-title', text: 'Sign in' }),
        h('p', { class: 'login-sub', text: 'Sandboxed terminals and commands on this host.' }),
        notice ? h('p', { class: 'login-notice', role: 'status' }, icon('alert'), h('span', { text: notice })) : null,
        form,
      ),
    ),
  );
  user.focus();
}
