import { render } from 'preact';
import { App } from './App.js';
import { queryClient, QueryContext } from './lib/query.js';
import './styles.css';

render(
  <QueryContext.Provider value={queryClient}>
    <App />
  </QueryContext.Provider>,
  document.getElementById('root')!,
);
