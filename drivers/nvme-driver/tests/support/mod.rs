pub mod hostile;
